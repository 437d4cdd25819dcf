"""``vllm bench serve`` / ``benchmark_serving.py --save-result``
(per-request arrays only with ``--save-detailed``; one object per line with
``--append-result``). ``start_times`` are ``time.perf_counter()`` readings.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from zoneinfo import ZoneInfo

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
    JSON_DECODER,
    account_document,
    concat_frames,
    finish_requests,
    first_column,
    place_on_clock,
    placeholders,
    salvage_array,
    status_from_text,
)

# ---------------------------------------------------------------- vLLM bench serve

VLLM_ARRAYS = (
    "input_lens",
    "output_lens",
    "ttfts",
    "itls",
    "latencies",
    "start_times",
    "queue_times",
    "errors",
    "generated_texts",
)
VLLM_SCALARS = (
    "date",
    "backend",
    "endpoint_type",
    "num_prompts",
    "duration",
    "completed",
    "failed",
)
VLLM_DATE_RE = r'"date"\s*:\s*"\d{8}-\d{6}"'


@register_file_format
class VllmBench(FileFormat):
    """``vllm bench serve`` / ``benchmark_serving.py`` ``--save-result`` JSON."""

    name = "vllm_bench"
    priority = 12
    samples = (
        Sample(
            "vllm/benchmarks/serve.py result_json with --save-detailed; values invented",
            file="vllm_bench_detailed.json",
        ),
    )
    role = "client"

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:3])
        return (
            head[0].lstrip().startswith("{")
            and bool(re.match(r"\s*\{?\s*" + VLLM_DATE_RE, text))
            and any(k in text for k in ('"backend"', '"endpoint_type"', '"num_prompts"'))
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        result = ParseResult(formats=[self.name])
        docs = self._documents(source, result)
        frames = []
        for i, (doc, origin) in enumerate(docs):
            prefix = f"run {i + 1} ({origin}): " if len(docs) > 1 else ""
            frames.append(self._run(doc, i, len(docs), origin, source.display, ctx, result, prefix))
        if frames:
            finish_requests(result, concat_frames(frames), source.display)
        return result

    @staticmethod
    def _documents(source: SourceFile, result: ParseResult) -> list[tuple[dict, str]]:
        """The result objects: one, or one per line (--append-result); broken ones salvaged."""
        text = source.text
        try:
            doc = json.loads(text)
        except ValueError:
            doc = None
        if doc is not None:
            account_document(result, source, len(text) if isinstance(doc, dict) else 0)
            if not isinstance(doc, dict):
                result.notes.append("the document is not a JSON object: nothing read")
                return []
            return [(doc, "document")]
        lines = source.lines
        nonblank = lines.filter(pl.col("text").str.strip_chars() != "")
        one_per_line = nonblank.height > 0 and nonblank["text"].str.starts_with("{").all()
        if not one_per_line:  # a pretty-printed document, cut short
            doc, cut = VllmBench._salvage(text, result, "the document")
            account_document(result, source, cut)
            return [(doc, "document")]
        docs, bad = [], []
        for line_no, line in nonblank.select("line_no", "text").iter_rows():
            try:
                docs.append((json.loads(line), f"line {line_no}"))
            except ValueError:
                doc, _ = VllmBench._salvage(line, result, f"line {line_no}")
                docs.append((doc, f"line {line_no}"))
                bad.append(line_no)
        result.lines = lines.height
        result.noise = lines.height - nonblank.height
        result.parsed = nonblank.height - len(bad)
        result.set_unparsed(lines.filter(pl.col("line_no").is_in(bad)))
        return docs

    @staticmethod
    def _salvage(text: str, result: ParseResult, where: str) -> tuple[dict, int]:
        doc, cut, partial = {}, len(text), []
        for key in VLLM_SCALARS + VLLM_ARRAYS:
            m = re.search(r'(?<![\\\w])"' + key + r'"\s*:\s*', text)
            if not m:
                continue
            try:
                doc[key], _ = JSON_DECODER.raw_decode(text, m.end())
            except ValueError:
                cut = min(cut, m.start())
                if text[m.end() : m.end() + 1] == "[":
                    doc[key], _ = salvage_array(text, m.end())
                    partial.append(f"{key} ({len(doc[key])} complete values)")
        result.notes.append(
            f"{where} is cut short or broken: read its fields as far as they go"
            + (f"; partial arrays: {', '.join(partial)}" if partial else "")
        )
        return doc, cut

    @staticmethod
    def _run(doc, i, n_docs, origin, display, ctx, result, prefix) -> pl.DataFrame:
        notes = result.notes
        step = i + 1 if n_docs > 1 else None
        level = doc.get("max_concurrency")  # `--max-concurrency`; None: unbounded (rate only)
        level = int(level) if isinstance(level, int | float) else None
        where = "" if origin == "document" else f"{origin} "
        aggregate = f"{display}:{where}aggregate count"
        arrays = {k: doc[k] for k in VLLM_ARRAYS if isinstance(doc.get(k), list)}
        n = max((len(v) for v in arrays.values()), default=0)
        lengths = {k: len(v) for k, v in arrays.items() if k != "generated_texts"}
        if len(set(lengths.values())) > 1:
            notes.append(
                f"{prefix}per-request arrays differ in length ({', '.join(f'{k} {v}' for k, v in lengths.items())}): "
                "values past an array's end are unknown"
            )
        completed, failed = doc.get("completed"), doc.get("failed")
        if failed is None and completed is not None and doc.get("num_prompts") is not None:
            failed = max(0, int(doc["num_prompts"]) - int(completed))
            notes.append(
                f"{prefix}no `failed` count (older script): taken as num_prompts − completed = {failed}"
            )
        frames = []
        if n:
            cols = {
                k: pl.Series(k, list(arrays.get(k, [])) + [None] * (n - len(arrays.get(k, []))))
                for k in ("ttfts", "latencies", "start_times", "output_lens", "errors", "itls")
                if k in arrays
            }
            f = pl.DataFrame(list(cols.values())).with_row_index("_i")
            err = first_column(f, "errors", dtype=pl.Utf8)
            ttft = first_column(f, "ttfts", dtype=pl.Float64)
            lat = first_column(f, "latencies", dtype=pl.Float64)
            # the errors array decides; past its end (or without it) ttft, then latency
            ok = pl.coalesce(err == "", ttft > 0, lat > 0)
            if "errors" in arrays:
                pass
            elif "ttfts" in arrays:
                notes.append(
                    f"{prefix}no `errors` array (saved only with --save-detailed): outcome taken from ttft > 0"
                )
            else:
                notes.append(
                    f"{prefix}no `errors` array (saved only with --save-detailed): outcome taken "
                    "from latency > 0 (vLLM leaves a failed request's latency at 0)"
                )
            itl_sum = (
                pl.col("itls").cast(pl.List(pl.Float64), strict=False).list.sum()
                if "itls" in f.columns
                else pl.lit(None, dtype=pl.Float64)
            )
            latency = (
                pl.when(lat > 0).then(lat).when(ok & (ttft > 0)).then(ttft + itl_sum.fill_null(0.0))
            )
            if "latencies" not in arrays and "ttfts" in arrays:
                notes.append(f"{prefix}no `latencies` array (older script): latency = ttft + Σ itl")
            error = pl.when(err != "").then(err)  # no evidence either way: outcome unknown
            f = f.select(
                pl.lit(step, dtype=pl.Int64).alias("step"),
                pl.lit(level, dtype=pl.Int64).alias("concurrency"),
                pl.col("_i").cast(pl.Int64).alias("index"),
                first_column(f, "start_times", dtype=pl.Float64).alias("_start"),
                latency.alias("latency_s"),
                ok.alias("ok"),
                status_from_text(error).alias("http_status"),
                error.alias("error"),
                first_column(f, "output_lens", dtype=pl.Int64).alias("output_tokens"),
                pl.when(ttft > 0).then(ttft).alias("ttft_s"),  # seconds; a failure's is 0
                model.source_id(f"{display}:{where}record ", pl.col("_i") + 1),
            ).with_columns((pl.col("_start") + pl.col("latency_s")).alias("_end"))
            frames.append(f)
            have_ok = f.filter(pl.col("ok").fill_null(False)).height
            have_failed = f.filter(~pl.col("ok").fill_null(True)).height  # unknown: neither
            if completed is not None and (have_ok, have_failed) != (completed, failed or 0):
                short_ok = max(0, int(completed) - have_ok)
                short_failed = max(0, int(failed or 0) - have_failed)
                if short_ok or short_failed:
                    frames.append(placeholders(short_ok, True, aggregate, step, concurrency=level))
                    frames.append(
                        placeholders(
                            short_failed,
                            False,
                            aggregate,
                            step,
                            "failed (counted by the aggregate only)",
                            level,
                        )
                    )
                notes.append(
                    f"{prefix}{have_ok} ok / {have_failed} failed per-request records but the "
                    f"aggregates say completed={completed}, failed={failed}: totals come from the "
                    f"aggregates ({short_ok + short_failed} requests have no per-request record)"
                )
            if "start_times" not in arrays:
                notes.append(
                    f"{prefix}no `start_times` (saved only with --save-detailed by newer "
                    "scripts): requests cannot be placed on the servers' clock one by one"
                )
        elif completed is not None:
            frames.append(placeholders(int(completed), True, aggregate, step, concurrency=level))
            frames.append(
                placeholders(
                    int(failed or 0),
                    False,
                    aggregate,
                    step,
                    "failed (counted by the aggregate only)",
                    level,
                )
            )
            notes.append(
                f"{prefix}aggregates only (saved without --save-detailed): completed={completed}, "
                f"failed={failed or 0}; requests cannot be matched one by one"
            )
        else:
            notes.append(f"{prefix}neither per-request arrays nor counts: nothing read")
            return pl.DataFrame()
        rate = doc.get("request_rate")  # `--request-rate`; "inf" (the default): unbounded
        rate = float(rate) if isinstance(rate, int | float) and rate > 0 else None
        frame = concat_frames(frames).with_columns(pl.lit(rate, dtype=pl.Float64).alias("rate"))
        zero, how = VllmBench._date_anchor(doc, frame, ctx)
        return place_on_clock(
            frame,
            ctx,
            notes,
            clock="time.perf_counter() seconds of `start_times`",
            file_zero=zero,
            file_zero_how=how,
            prefix=prefix,
        )

    @staticmethod
    def _date_anchor(doc: dict, frame: pl.DataFrame, ctx: ParseContext):
        """The `date` field is local wall time, whole seconds, written as the run ended."""
        date = doc.get("date")
        if not isinstance(date, str) or "_start" not in frame.columns:
            return None, None
        try:
            wall = dt.datetime.strptime(date, "%Y%m%d-%H%M%S").replace(
                tzinfo=ZoneInfo(ctx.client_tz)
            )
        except ValueError:
            return None, None
        last = frame.select(pl.max_horizontal(pl.col("_end").max(), pl.col("_start").max())).item()
        if last is None:
            return None, None
        return (
            wall.timestamp() - last,
            f"the file's `date` {date} (local time read in {ctx.client_tz}, whole seconds, written "
            "when the run ended: the last request's end is put there, ±1 s)",
        )


# ---------------------------------------------------------------- vllm bench sweep serve summary.json


def ms_to_s(doc: dict, metric: str) -> dict[str, float]:
    """vLLM's ``mean_/median_/pNN_<metric>_ms`` figures, in seconds."""
    out = {}
    for key, name in (("mean", f"mean_{metric}_ms"), ("p50", f"median_{metric}_ms")):
        if isinstance(doc.get(name), int | float):
            out[key] = doc[name] / 1e3
    for name, value in doc.items():
        found = re.fullmatch(rf"p(\d+(?:\.\d+)?)_{metric}_ms", name)
        if found and isinstance(value, int | float):
            out[f"p{found.group(1)}"] = value / 1e3
    return out


@register_file_format
class VllmSweepSummary(FileFormat):
    """``vllm bench sweep serve``'s ``summary.json``: one parameter combination's runs, a
    JSON list (``json.dump(indent=4)``) of ``vllm bench serve --save-result`` objects, each
    with its ``run_number`` and the sweep's serve and bench parameters added. Each run's
    own figures (completed, failed, latency, throughput) become a tester summary; no
    requests: the same runs as the ``run=N.json`` files beside it."""

    name = "vllm_bench_sweep_summary"
    role = "client"
    priority = 31
    samples = (
        Sample(
            "layout of vllm-project/vllm vllm/benchmarks/sweep/serve.py @ 4fa9174d (run_comb: "
            "json.dump(comb_data, indent=4)) holding vllm/benchmarks/serve.py @ 009e6d4a "
            "result_json without --save-detailed; values invented",
            file="vllm_bench_sweep_summary.json",
        ),
    )

    def sniff(self, head: list[str]) -> bool:
        text = "\n".join(head[:6])
        return (
            head[0].strip() == "["
            and bool(re.search(r"^\s*\{\s*$", text, re.M))
            and bool(re.search(VLLM_DATE_RE, text))
            and any(k in text for k in ('"backend"', '"endpoint_type"', '"num_prompts"'))
        )

    def parse(self, source: SourceFile, ctx: ParseContext) -> ParseResult:
        lines, _ = source.stream_facts()
        result = ParseResult(lines=lines, formats=[self.name])
        try:
            doc = json.loads(source.text)
        except ValueError as exc:
            result.set_unparsed(source.lines)
            result.notes.append(f"not readable JSON ({exc}): nothing read")
            return result
        runs = [r for r in doc if isinstance(r, dict)] if isinstance(doc, list) else []
        for i, run in enumerate(runs):
            keys = list(run)
            # the sweep's parameters: added after run_number (a parameter vLLM's result
            # already holds, such as max_concurrency, keeps its place and its value)
            after = keys[keys.index("run_number") + 1 :] if "run_number" in keys else []
            params = {k: run[k] for k in after}
            level = run.get("max_concurrency")
            rate = run.get("request_rate")
            completed, failed = run.get("completed"), run.get("failed")
            sent = (
                completed + failed
                if isinstance(completed, int) and isinstance(failed, int)
                else run.get("num_prompts")
            )
            result.tester_summaries.append(
                {
                    "tester": "vllm bench serve (sweep)",
                    "run": run.get("run_number"),
                    "step": i + 1,
                    "concurrency": int(level) if isinstance(level, int | float) else None,
                    "rate": float(rate) if isinstance(rate, int | float) and rate > 0 else None,
                    "sent": sent,
                    "ok": completed,
                    "failed": failed,
                    "latency_s": ms_to_s(run, "e2el"),
                    "ttft_s": ms_to_s(run, "ttft"),
                    "requests_per_s": run.get("request_throughput"),
                    "output_tokens_per_s": run.get("output_throughput"),
                    "parameters": params,
                }
            )
            shown = ", ".join(f"{k}={v}" for k, v in params.items()) or "no sweep parameters"
            result.notes.append(
                f"run {i + 1}: run_number {run.get('run_number')}, {shown}; max_concurrency "
                f"{level}, request_rate {rate}: {completed} completed, {failed} failed"
            )
        result.parsed = len(runs)
        result.noise = lines - len(runs)
        if not runs:
            result.notes.append("no run objects in the list: nothing read")
        result.notes.append(
            "vllm bench sweep's summary of one parameter combination: the same runs as the "
            "run=N.json files beside it, not re-counted"
        )
        return result
