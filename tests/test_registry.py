"""Every registered format reads its own real samples, and no other format claims them.

The samples live beside each format's pattern (`samples = (Sample(origin, text), ...)`);
this test is what keeps them honest, as lnav's format files do.
"""

from pathlib import Path

import pytest

from logforensics.ingest import (
    FILE_FORMATS,
    LINE_FORMATS,
    ParseContext,
    SourceFile,
    catalog,
    detect,
)
from logforensics.ingest.serverlog import classify_lines, parse_lines, prepared_lines

CTX = ParseContext(year=2026)
LINE_CASES = [
    pytest.param(fmt, i, sample, id=f"{fmt.name}-{i}")
    for fmt in LINE_FORMATS.values()
    for i, sample in enumerate(fmt.samples)
]
FILE_CASES = [
    pytest.param(fmt, i, sample, id=f"{fmt.name}-{i}")
    for fmt in FILE_FORMATS.values()
    for i, sample in enumerate(fmt.samples)
]


def test_every_format_has_a_sample_and_a_unique_priority():
    for registry in (FILE_FORMATS, LINE_FORMATS):
        assert all(fmt.samples for fmt in registry.values()), [
            n for n, f in registry.items() if not f.samples
        ]
        priorities = [fmt.priority for fmt in registry.values()]
        assert priorities == sorted(set(priorities))


def _source(tmp_path: Path, name: str, text: str) -> SourceFile:
    path = tmp_path / name
    path.write_text(text if text.endswith("\n") else text + "\n")
    return SourceFile(path, name, "x")


@pytest.mark.parametrize(("fmt", "i", "sample"), LINE_CASES)
def test_line_format_claims_its_samples(tmp_path, fmt, i, sample):
    source = _source(tmp_path, f"{fmt.name}.log", sample.read())
    fates = classify_lines(source, CTX, sample.role)
    assert fates["format"].to_list() == [fmt.name] * fates.height, fates.rows()
    if sample.status != "any":  # "any": its lines, records or noise (a first start vs later)
        assert set(fates["status"]) == {sample.status}
    frame = prepared_lines(source, CTX, sample.role)
    for other in LINE_FORMATS.values():
        if other is not fmt and not other.fallback and other.name not in fmt.supersedes:
            claim = other.extract(frame, source)
            assert claim.records.len() + claim.noise.len() == 0, f"{other.name} claims it too"


@pytest.mark.parametrize(("fmt", "i", "sample"), LINE_CASES)
def test_line_format_samples_give_their_rows(tmp_path, fmt, i, sample):
    result = parse_lines(_source(tmp_path, "s.log", sample.read()), CTX, sample.role)
    for table, rows in sample.tables:
        assert result.table(table).height == rows, table


@pytest.mark.parametrize(("fmt", "i", "sample"), FILE_CASES)
def test_file_format_reads_its_samples_and_no_other_sniffs_them(tmp_path, fmt, i, sample):
    source = _source(tmp_path, sample.file, sample.read())
    assert detect(source) is fmt
    head = source.head()
    others = [o for o in FILE_FORMATS.values() if o is not fmt and not o.fallback]
    assert [o.name for o in others if o.sniff(head)] == []
    result = fmt.parse(source, CTX)
    assert result.lines > 0 and result.unparsed == 0, result.unparsed_examples
    assert result.parsed + result.noise + result.unparsed == result.lines
    for table, rows in sample.tables:
        assert result.table(table).height == rows, table


def test_docs_formats_md_lists_the_registry_as_it_is():
    docs = Path(__file__).parents[1] / "docs" / "formats.md"
    text = docs.read_text()
    assert catalog.replace_section(text) == text, (
        "docs/formats.md is stale: run python -m logforensics.ingest.catalog docs/formats.md"
    )
