"""`logforensics loadtest`'s configuration (``run.config.json`` beside ``run.jsonl``).

One JSON object on one line, marked by ``logforensics_loadtest`` (the writer's version):
the steps, rest, timeout, max tokens, temperature, ``ignore_eos``, streaming, the model and
the prompts (count and SHA-256, never their text). No requests: it is the run's conditions,
kept on the input (`run_config`) so `compare` can say whether two runs are comparable.
"""

from __future__ import annotations

import json

from logforensics.ingest import register_file_format
from logforensics.ingest.base import FileFormat, ParseContext, ParseResult, Sample, SourceFile
from logforensics.loadtest import CONFIG_KEY


def _config(line: str) -> dict | None:
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) and CONFIG_KEY in record else None


@register_file_format
class LoadtestConfig(FileFormat):
    name = "loadtest_config"
    role = "client"
    priority = 44
    samples = (
        Sample(
            "logforensics loadtest 0.1.0 --ignore-eos against the test suite's stub server (run.config.json)",
            file="lf_run.config.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return bool(head) and _config(head[0]) is not None

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        texts = lines["text"].to_list()
        config = _config(texts[0]) if texts else None
        rest = lines.slice(1)
        blank = rest.filter(rest["text"].str.strip_chars() == "")
        result.noise = blank.height
        result.set_unparsed(rest.filter(rest["text"].str.strip_chars() != ""))
        if config is not None:
            result.parsed = 1
            result.run_config = config
            result.notes.append(
                f"logforensics loadtest's configuration of run {config.get('run_id')}: the "
                "conditions `compare` checks, no requests"
            )
        return result
