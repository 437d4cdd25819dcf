"""LiteLLM proxy/router lines. Exact text, from the project's source:

* LiteLLM ``litellm/_logging.py`` (``%(asctime)s - %(name)s:%(levelname)s:
  %(filename)s:%(lineno)s - %(message)s``, time only) and
  ``litellm/router.py`` (``litellm.acompletion(model=…) 200 OK`` /
  ``… Exception …``);
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    ProxyLineFormat,
    first_kind,
    format_text,
    proxy_failures,
    proxy_rows,
)

# ---------------------------------------------------------------------- LiteLLM

LITELLM_RE = (
    r"^(?P<tod>\d{2}:\d{2}:\d{2}) - (?P<logger>LiteLLM(?: Router| Proxy)?):(?P<lvl>[A-Z]+): "
    r"(?P<file>[\w.]+):(?P<lno>\d+) - (?P<message>.*)$"
)
LITELLM_CALL_RE = r"^litellm\.a?(?:completion|text_completion|embedding)\(model=(?P<model>[^)]*)\)\s*(?P<outcome>.*)$"
LITELLM_KINDS = {
    "timeout": r"Timeout|timed out",
    "conn_refused": r"Connection refused|ConnectError|Cannot connect",
    "conn_error": r"APIConnectionError|Connection error|ServerDisconnected|RemoteProtocolError",
    "rate_limited": r"RateLimitError|429",
    "upstream_5xx": r"InternalServerError|ServiceUnavailableError|BadGatewayError|\b50[0-4]\b",
    "exception": r"Exception",
}


@register_line_format
class LitellmProxy(ProxyLineFormat):
    """LiteLLM proxy/router lines.

    The router logs each call to a deployment: ``litellm.acompletion(model=M)
    200 OK`` (the deployment answered) or ``… Exception E`` → a
    `proxy_requests` row (`upstream` = the deployment's model name, as
    logged) and, for an exception, a `proxy_event` (Timeout → timeout,
    APIConnectionError → conn_error, InternalServerError /
    ServiceUnavailable → upstream_5xx, RateLimitError → rate_limited; a
    client's BadRequest is not an event). LiteLLM's own stamp is a time of
    day only: the line's time comes from the container/journal stamp or its
    neighbours. Other LiteLLM lines are noise.
    """

    name = "litellm"
    priority = 36
    per_line = True
    samples = (
        Sample(
            "litellm _logging.py formatter + router.py call line; values invented",
            "06:16:10 - LiteLLM Router:INFO: router.py:2890 - "
            "litellm.acompletion(model=hosted_vllm/meta-llama/Llama-3.1-8B-Instruct) 200 OK",
            role="proxy",
            tables=(("proxy_requests", 1),),
        ),
    )
    pattern = LITELLM_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        hits = self.parsed(lines, LITELLM_RE)
        hits = hits.with_columns(
            pl.col("message").str.extract_groups(LITELLM_CALL_RE).alias("_c")
        ).unnest("_c")
        calls = hits.filter(pl.col("model").is_not_null())
        outcome = pl.col("outcome").str.strip_chars()
        ok = outcome.str.starts_with("200 OK")
        exc_kind = first_kind(LITELLM_KINDS, outcome)
        client_error = outcome.str.contains(
            r"BadRequestError|AuthenticationError|NotFoundError|PermissionDenied|ContextWindowExceeded"
        )
        frame = calls.with_columns(
            pl.col("model").alias("upstream"),
            pl.when(ok).then(200).alias("upstream_status"),
            pl.lit(None, dtype=pl.Int64).alias("http_status"),
            pl.when(ok)
            .then(pl.lit("upstream"))
            .when(exc_kind == "upstream_5xx")
            .then(pl.lit("upstream"))
            .otherwise(pl.lit("unknown"))
            .alias("status_origin"),
            pl.when(ok | (exc_kind == "upstream_5xx") | client_error)
            .then(pl.lit("reached"))
            .otherwise(pl.lit("unknown"))
            .alias("delivery"),
        )
        rows = proxy_rows(frame, source)
        kind = pl.when(~ok & ~client_error).then(exc_kind)
        detail = format_text("litellm call to {}: {}", pl.col("model"), outcome)
        used = calls["line_no"]
        noise = hits.filter(pl.col("model").is_null())["line_no"]
        return Claim(
            records=used,
            noise=noise,
            tables={
                "proxy_requests": rows,
                "proxy_events": proxy_failures(frame, kind, detail, source),
            },
        )
