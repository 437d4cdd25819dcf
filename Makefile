# Every target creates .venv if missing and installs the project into it:
# nothing needs installing by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint clean bench validate

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,ray]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/logforensics analyze fixtures/seed-two-instances \
		-o reports/seed-two-instances.html \
		--json reports/seed-two-instances.json \
		--md reports/seed-two-instances.md

test: $(STAMP)
	$(BIN)/ruff check logforensics tests tools bench
	$(BIN)/python -m pytest -q
	$(BIN)/python tools/validate.py

lint: $(STAMP)
	$(BIN)/ruff check logforensics tests
	$(BIN)/ruff format --check logforensics tests

clean:
	rm -rf $(VENV) reports/*.html reports/*.json reports/*.md reports/*.png

bench: $(STAMP)
	$(BIN)/python bench/run.py $(if $(SIZES),--sizes $(SIZES))

validate: $(STAMP)
	$(BIN)/python tools/validate.py
