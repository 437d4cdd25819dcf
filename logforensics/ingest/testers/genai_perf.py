"""genai-perf / perf_analyzer ``profile_export.json``
(``system_clock`` ns), and genai-perf's statistics table ``profile_export_genai_perf.csv``.
"""

from __future__ import annotations

import csv
import json
import re

import polars as pl

from logforensics import model
from logforensics.ingest import register_file_format
from logforensics.ingest.base import (
    FileFormat,
    ParseContext,
    ParseResult,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    account_document,
    finish_requests,
    place_on_clock,
    salvage_objects,
)

# ---------------------------------------------------------------- genai-perf profile_export.json

GENAI_REQUEST_RE = r'\{\s*"timestamp"\s*:'


@register_file_format
class GenAIPerfJson(FileFormat):
    """genai-perf / perf_analyzer ``profile_export.json``: experiments → requests (ns)."""

    name = "genai_perf_json"
    priority = 14
    samples = (
        Sample(
            "perf_analyzer src/profile_data_exporter.cc shape; values invented",
            file="genai_perf_profile_export.json",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head)
        return head[0].lstrip().startswith("{") and bool(
            re.search(r'"experiments"\s*:\s*\[\s*\{\s*"experiment"\s*:', text)
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        text = source.text
        rows: list[tuple[int, int, dict]] = []  # (experiment, record number, request)
        modes: dict[int, str] = {}
        try:
            doc = json.loads(text)
            readable_to = len(text)
            for e, exp in enumerate(doc.get("experiments") or []):
                mode = exp.get("experiment") or {}
                modes[e] = f"{mode.get('mode')} {mode.get('value')}"
                rows.extend((e, 0, r) for r in exp.get("requests") or [])
        except ValueError as exc:
            salvaged = salvage_objects(text, GENAI_REQUEST_RE)
            readable_to = salvaged[-1][1] if salvaged else 0
            exp_at = [m.start() for m in re.finditer(r'"experiment"\s*:\s*\{', text)]
            rows = [(max(0, sum(p < pos for p in exp_at) - 1), 0, r) for pos, _, r in salvaged]
            result.notes.append(
                f"the document is cut short or broken ({exc.msg} at character {exc.pos}): "
                f"{len(salvaged)} complete request records read; the rest is unparsed"
            )
        account_document(result, source, readable_to)
        if modes:
            result.notes.append("experiments: " + "; ".join(modes[e] for e in sorted(modes)))
        if not rows:
            return result
        n_exp = max(e for e, _, _ in rows) + 1

        def body(request: dict) -> str:
            outs = request.get("response_outputs") or []
            return "\n".join(
                str(o.get("response", o.get("text_output", ""))) if isinstance(o, dict) else str(o)
                for o in outs
            )

        f = pl.DataFrame(
            {
                "_exp": [e for e, _, _ in rows],
                "timestamp": [r.get("timestamp") for _, _, r in rows],
                "_last": [
                    max(r.get("response_timestamps") or [None], key=lambda v: v or 0)
                    for _, _, r in rows
                ],
                "_responses": [len(r.get("response_timestamps") or []) for _, _, r in rows],
                "_body": [body(r) for _, _, r in rows],
            },
            schema_overrides={"timestamp": pl.Float64, "_last": pl.Float64, "_body": pl.Utf8},
        ).with_row_index("_rec", offset=1)
        is_error = pl.col("_body").str.contains(r'"error"\s*:|"object"\s*:\s*"error"')
        message = pl.col("_body").str.extract(r'"message"\s*:\s*"((?:[^"\\]|\\.)*)"', 1)
        code = (
            pl.col("_body")
            .str.extract(r'"code"\s*:\s*"?([1-5]\d{2})\b', 1)
            .cast(pl.Int64, strict=False)
        )
        ok = (pl.col("_responses") > 0) & ~is_error
        frame = f.select(
            (pl.col("_exp") + 1 if n_exp > 1 else pl.lit(None, dtype=pl.Int64)).alias("step"),
            (pl.col("_rec") - 1).cast(pl.Int64).alias("index"),
            (pl.col("timestamp") / 1e9).alias("_start"),
            (pl.col("_last") / 1e9).alias("_end"),
            pl.lit(None, dtype=pl.Float64).alias("latency_s"),
            ok.alias("ok"),
            pl.when(~ok).then(code).alias("http_status"),
            pl.when(is_error)
            .then(pl.coalesce(message, pl.lit("error in the response body")))
            .when(pl.col("_responses") == 0)
            .then(pl.lit("no response recorded"))
            .alias("error"),
            pl.col("_body")
            .str.extract_all(r'"completion_tokens"\s*:\s*\d+')
            .list.last()
            .str.extract(r"(\d+)$", 1)
            .cast(pl.Int64, strict=False)
            .alias("output_tokens"),
            pl.col("_body").str.extract(r'"id"\s*:\s*"([^"]+)"', 1).alias("request_id"),
            model.source_id(f"{source.display}:record ", pl.col("_rec")),
        )
        frame = place_on_clock(
            frame, ctx, result.notes, clock="system_clock ns (timestamp / response_timestamps)"
        )
        finish_requests(result, frame, source.display)
        return result


# ---------------------------------------------------------------- genai-perf profile_export_genai_perf.csv

# genai-perf's CsvExporter (genai-perf/genai_perf/export_data/csv_exporter.py): a table of
# per-request statistics under "Metric,avg,min,max,p99,…", a blank row, then "Metric,Value"
# rows (throughputs, request count); newer versions append GPU telemetry tables
# ("Metric,GPU,…") measured on the host genai-perf ran on.
GENAI_CSV_HEAD_RE = r"^\ufeff?Metric,avg,min,max,p\d+,"
GENAI_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0}
GENAI_FOLDER_RE = r"-(concurrency|request_rate)(\d+(?:\.\d+)?)$"  # artifacts/<model>-…-concurrency8


def genai_number(text: str) -> float | None:
    """A genai-perf figure: ``1,234.56`` (thousands separators), or N/A."""
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def genai_metric(label: str) -> tuple[str, str | None]:
    """``Request Latency (ms)`` → (``request latency``, ``ms``); no unit for token counts."""
    found = re.fullmatch(r"(.*?)\s*\(([^)]*)\)\s*", label)
    if not found:
        return label.strip().lower(), None
    return found.group(1).lower(), found.group(2)


@register_file_format
class GenAIPerfCsv(FileFormat):
    """genai-perf ``profile_export_genai_perf.csv``: the run's statistics as genai-perf
    computed them (latency percentiles, throughputs, request count); no requests, the
    same run as its ``profile_export.json``. Its figures become a tester summary; the
    concurrency or request rate comes from the artifact folder's name, where it says."""

    name = "genai_perf_csv"
    role = "client"
    priority = 25
    samples = (
        Sample(
            "triton-inference-server/perf_analyzer issue #393 (2025-07-07 comment: genai-perf "
            "--concurrency 144 --request-count 500 against Qwen2.5-72B-Instruct-AWQ), as pasted",
            file="genai_perf_profile_export_genai_perf.csv",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        return bool(re.match(GENAI_CSV_HEAD_RE, head[0]))

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines = source.lines
        result = ParseResult(lines=lines.height, formats=[self.name])
        stats: dict[str, dict[str, float | None]] = {}  # metric → stat → value
        units: dict[str, str | None] = {}
        scalars: dict[str, float | None] = {}
        header: list[str] = []
        parsed, noise, bad = 0, 0, []
        for line_no, text in lines.select("line_no", "text").iter_rows():
            row = next(csv.reader([text.lstrip("\ufeff")]), [])
            if not any(cell.strip() for cell in row):
                noise += 1
            elif row[0] == "Metric":
                header, noise = row, noise + 1
            elif header[1:2] == ["GPU"]:  # telemetry of the host genai-perf ran on
                noise += 1
            elif header == ["Metric", "Value"] and len(row) == 2:
                name, unit = genai_metric(row[0])
                scalars[name], units[name] = genai_number(row[1]), unit
                parsed += 1
            elif len(header) > 2 and len(row) == len(header):
                name, unit = genai_metric(row[0])
                stats[name] = {k: genai_number(v) for k, v in zip(header[1:], row[1:], strict=True)}
                units[name] = unit
                parsed += 1
            else:
                bad.append(line_no)
        result.parsed, result.noise = parsed, noise
        result.set_unparsed(lines.filter(pl.col("line_no").is_in(bad)))
        if not parsed:
            return result

        def seconds(name: str) -> dict[str, float]:
            scale = GENAI_UNIT_SECONDS.get(units.get(name) or "")
            values = stats.get(name) or {}
            pick = {
                "mean": "avg",
                "p50": "p50",
                "p90": "p90",
                "p95": "p95",
                "p99": "p99",
                "max": "max",
            }
            return {
                k: values[v] * scale
                for k, v in pick.items()
                if scale is not None and values.get(v) is not None
            }

        mode, level = self._load(source)
        count = scalars.get("request count")
        summary = {
            "tester": "genai-perf",
            "concurrency": int(level) if mode == "concurrency" else None,
            "rate": level if mode == "request_rate" else None,
            "requests": int(count) if count is not None else None,
            "latency_s": seconds("request latency"),
            "ttft_s": seconds("time to first token"),
            "requests_per_s": scalars.get("request throughput"),
            "output_tokens_per_s": scalars.get("output token throughput"),
        }
        result.tester_summaries.append(summary)
        if mode:
            result.notes.append(
                f"{mode.replace('_', ' ')} {level:g} from the artifact folder's name"
            )
        result.notes.append(
            "genai-perf's statistics table: same run as its profile_export.json, not re-counted"
            + (
                f"; its request count ({summary['requests']}) covers the measurement windows "
                "only, and it counts no failures"
                if count is not None
                else ""
            )
        )
        return result

    @staticmethod
    def _load(source: SourceFile) -> tuple[str | None, float | None]:
        """genai-perf names its artifact folder after the load: ``…-concurrency8``,
        ``…-request_rate2.0``."""
        found = re.search(GENAI_FOLDER_RE, source.path.parent.name)
        return (found.group(1), float(found.group(2))) if found else (None, None)
