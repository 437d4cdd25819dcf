"""Lines every Python model server or proxy prints: uvicorn access lines, tracebacks.

* access: uvicorn's ``AccessFormatter`` default ``%(levelprefix)s
  %(client_addr)s - "%(request_line)s" %(status_code)s`` (status rendered as
  ``200 OK``; level prefix padded to ``INFO:     ``).
"""

from __future__ import annotations

import polars as pl

from logforensics.ingest import register_line_format
from logforensics.ingest.base import (
    Claim,
    LineFormat,
    Sample,
    SourceFile,
)
from logforensics.ingest.toolkit import (
    RegexLineFormat,
    file_role,
    first_kind,
    no_lines,
    source_expr,
)

UVICORN_ACCESS_RE = (
    r'^(?:INFO|WARNING|ERROR|DEBUG):\s+(?P<peer>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) '
    r'HTTP/[\d.]+" (?P<status>\d{3})\b'
)


def access_fields(hits: pl.DataFrame, peer: bool = True) -> pl.DataFrame:
    """`method`, `path`, `status` (and with `peer`, the `peer`) of lines UVICORN_ACCESS_RE
    matches.

    An ASCII line is cut at the delimiters the regex puts between its fields
    (each field holds none of them): 5× faster than its capture groups, which
    read the rest.
    """
    msg = pl.col("msg")
    if not hits.select(msg.str.len_bytes().sum() == msg.str.len_chars().sum()).item():
        fields = hits.with_columns(msg.str.extract_groups(UVICORN_ACCESS_RE).alias("_g"))
        fields = fields.unnest("_g")
        return fields if peer else fields.drop("peer")

    colon, dash = pl.col("_colon"), pl.col("_dash")
    request = pl.col("_request")
    return (
        hits.with_columns(
            msg.str.find(":", literal=True).alias("_colon"),
            msg.str.find(' - "', literal=True).alias("_dash"),
        )
        .with_columns(
            *(
                [msg.str.slice(colon + 1, dash - colon - 1).str.strip_chars_start().alias("peer")]
                if peer
                else []
            ),
            # METHOD PATH HTTP/x" STATUS…: no field holds a space
            msg.str.slice(dash + 4).str.splitn(" ", 4).alias("_request"),
        )
        .with_columns(
            request.struct.field("field_0").alias("method"),
            request.struct.field("field_1").alias("path"),
            request.struct.field("field_3").str.slice(0, 3).alias("status"),
        )
        .drop("_colon", "_dash", "_request")
    )


@register_line_format
class UvicornAccess(RegexLineFormat):
    """uvicorn's access line. In a proxy's log (a LiteLLM or router container) it is the proxy's."""

    name = "uvicorn_access"
    priority = 11
    per_line = True
    samples = (
        Sample(
            "corpus kv-tiny instance-1.log (uvicorn under vLLM 0.32.0)",
            'INFO:     127.0.0.1:52702 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            tables=(("server_requests", 1),),
        ),
    )
    pattern = UVICORN_ACCESS_RE

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        # only the columns read here go through the filters (a view per row and column)
        needed = lines.select(
            "line_no", "instance", "at", "at_precision_s", "msg", file_role(lines).alias("_role")
        )
        matched = self.matching(needed)
        in_proxy = matched.select(pl.col("_role") == "proxy").to_series()
        any_proxied = in_proxy.any()
        # the peer (uvicorn's ip:port, nearly one a request) is kept only as a proxy's client
        hits = access_fields(matched, peer=any_proxied)
        server = hits.filter(~in_proxy) if any_proxied else hits
        rows = server.select(
            "instance",
            "at",
            "at_precision_s",
            pl.lit("access").alias("event"),
            "method",
            "path",
            pl.col("status").cast(pl.Int64).alias("http_status"),
            source_expr(source.display).alias("source"),
        )
        if not any_proxied:
            return Claim(records=hits["line_no"], tables={"server_requests": rows})
        proxied = hits.filter(in_proxy).select(
            "at",
            pl.col("instance").alias("proxy"),
            pl.col("peer").alias("client"),
            "method",
            "path",
            pl.col("status").cast(pl.Int64).alias("http_status"),
            pl.lit("unknown").alias("status_origin"),
            pl.lit("unknown").alias("delivery"),
            source_expr(source.display).alias("source"),
        )
        return Claim(
            records=hits["line_no"],
            tables={"server_requests": rows, "proxy_requests": proxied},
        )


EXCEPTION_RE = r"^(?:[A-Za-z_][\w]*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Timeout|timeout))(?::\s?(?P<message>.*))?$"
FRAME_RE = r'^\s*File "(?P<file>[^"]+)", line (?P<lineno>\d+), in (?P<func>\S+)'
# Some write-ups (and log shippers) drop the quotes and "File": keep those frames too.
BARE_FRAME_RE = r"^\s*(?P<file>[\w./-]+\.py), line (?P<lineno>\d+), in (?P<func>\S+)"
# http.server's handle_error frames a traceback with a banner naming the client.
CHAIN_TEXT = (
    r"^Traceback \(most recent call last\):$|^During handling of the above exception"
    r"|^The above exception was the direct cause|^-{40}$"
    r"|^Exception occurred during processing of request from"
)
NETWORK_KINDS = {
    "timeout": r"Timeout|timed out|ReadTimeout|socket\.timeout",
    "broken_pipe": r"BrokenPipeError|Broken pipe",
    "conn_refused": r"ConnectionRefusedError|Connection refused",
    "conn_reset": r"ConnectionResetError|Connection reset",
    "remote_disconnected": r"RemoteDisconnected|IncompleteRead",
}
ENGINE_KINDS = {
    "oom": r"OutOfMemoryError|CUDA out of memory",
    "engine_dead": r"EngineDeadError|AsyncEngineDeadError",
}


def deciding_line(blocks: pl.DataFrame) -> pl.Series:
    """Per traceback block, the line of the exception that names the block's kind (the
    first, in the order raised), else of its first exception."""
    chains = blocks.select(
        pl.int_range(pl.len()).alias("_b"),
        pl.coalesce("engine_kind", "network_kind").alias("kind"),
        "chain",
        "chain_lines",
    ).explode("chain", "chain_lines")
    names_kind = pl.lit(False)
    for kind, rx in {**NETWORK_KINDS, **ENGINE_KINDS}.items():
        names_kind = (
            pl.when(pl.col("kind") == kind)
            .then(pl.col("chain").str.contains(rx))
            .otherwise(names_kind)
        )
    decided = chains.group_by("_b", maintain_order=True).agg(
        pl.col("chain_lines").filter(names_kind).first().alias("named"),
        pl.col("chain_lines").first().alias("first"),
    )
    return decided.sort("_b").select(pl.coalesce("named", "first"))["named"]


@register_line_format
class PythonTraceback(LineFormat):
    """A Python traceback: the whole block becomes one event.

    A traceback from a relaying proxy (network errors while forwarding) is a
    proxy event; one that names vLLM's engine or CUDA is an engine event.
    The event's time is that of the nearest stamped line. In a proxy's own
    log the event's `instance` is unknown (None).
    """

    name = "python_traceback"
    priority = 14
    samples = (
        Sample(
            "seed write-up's proxy traceback, framed as CPython socketserver.handle_error prints it",
            "----------------------------------------\n"
            "Exception occurred during processing of request from ('10.0.0.2', 51001)\n"
            "Traceback (most recent call last):\n"
            '  File "/app/proxy.py", line 74, in _forward\n'
            "    with urllib.request.urlopen(req, timeout=120) as resp:\n"
            "TimeoutError\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            '  File "/app/proxy.py", line 76, in _forward\n'
            '    self.send_error(502, f"Bad Gateway: {exc}")\n'
            "BrokenPipeError: [Errno 32] Broken pipe\n"
            "----------------------------------------",
            tables=(("proxy_events", 1),),
        ),
        Sample(
            "CPython 3.11.7 http.server relaying proxy run here: the client left before the 502 "
            "(frames trimmed; the ^^^ marker lines are 3.11's)",
            "----------------------------------------\n"
            "Exception occurred during processing of request from ('127.0.0.1', 49782)\n"
            "Traceback (most recent call last):\n"
            '  File "/tmp/pyproxy/proxy.py", line 12, in _forward\n'
            "    with urllib.request.urlopen(req, timeout=2) as resp:\n"
            "         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
            '  File "/root/.pyenv/versions/3.11.7/lib/python3.11/socket.py", line 706, in '
            "readinto\n"
            "    return self._sock.recv_into(b)\n"
            "           ^^^^^^^^^^^^^^^^^^^^^^^\n"
            "TimeoutError: timed out\n"
            "\n"
            "During handling of the above exception, another exception occurred:\n"
            "\n"
            "Traceback (most recent call last):\n"
            '  File "/tmp/pyproxy/proxy.py", line 19, in _forward\n'
            '    self.send_error(502, f"Bad Gateway: {exc}")\n'
            '  File "/root/.pyenv/versions/3.11.7/lib/python3.11/socketserver.py", line 834, in '
            "write\n"
            "    self._sock.sendall(b)\n"
            "BrokenPipeError: [Errno 32] Broken pipe\n"
            "----------------------------------------",
            role="proxy",
            tables=(("proxy_events", 1),),
        ),
    )
    decisive = True
    proxy = False

    def sniff(self, bodies: list[str]) -> bool:
        return any(b.startswith("Traceback (most recent call last)") for b in bodies)

    # Every frame line holds ", line " and a block needs a frame: one literal scan decides.
    woken_by = pl.col("msg").str.contains(", line ", literal=True)

    def extract(self, lines: pl.DataFrame, source: SourceFile) -> Claim:
        msg = pl.col("msg")
        if not lines.select(self.woken_by.any()).item():
            return Claim(records=no_lines())
        is_frame = msg.str.contains(FRAME_RE) | msg.str.contains(BARE_FRAME_RE)
        is_exc = msg.str.contains(EXCEPTION_RE)
        is_chain = msg.str.contains(CHAIN_TEXT)
        marked = lines.with_columns(
            is_frame.alias("is_frame"),
            is_exc.alias("is_exc"),
            is_chain.alias("is_chain"),
            # code lines follow a frame line, indented
            (msg.str.starts_with(" ") & is_frame.shift(1).fill_null(False)).alias("is_code"),
            # Python 3.11+ marks the failing expression under a code line: "    ^^^^~~~~"
            msg.str.contains(r"^\s+[~^]+\s*$").alias("is_marker"),
            file_role(lines).alias("_role"),
        )
        # A block: a run of frame/code/exception/chain lines (blank lines between
        # chained tracebacks included) that holds at least one frame.
        part = (
            pl.col("is_frame")
            | pl.col("is_exc")
            | pl.col("is_chain")
            | pl.col("is_code")
            | pl.col("is_marker")
            | ((msg.str.strip_chars() == "") & pl.col("is_chain").shift(-1).fill_null(False))
        )
        contiguous = pl.col("line_no").diff().fill_null(1) != 1
        marked = (
            marked.with_columns(part.alias("part"))
            .with_columns((~pl.col("part") | contiguous).cum_sum().alias("block"))
            .filter(pl.col("part"))
        )
        if marked.is_empty():
            return Claim(records=no_lines())
        frames = pl.coalesce(
            msg.str.extract_groups(FRAME_RE), msg.str.extract_groups(BARE_FRAME_RE)
        )
        blocks = (
            marked.with_columns(frames.alias("_f"), msg.str.extract(EXCEPTION_RE, 1).alias("exc"))
            .group_by("block", maintain_order=True)
            .agg(
                pl.col("line_no").first().alias("line_no"),
                pl.col("line_no").alias("members"),
                pl.col("is_frame").sum().alias("frames"),
                pl.col("instance").first(),
                pl.col("_role").first(),
                pl.col("at").first(),
                pl.col("msg").filter(pl.col("is_exc")).alias("chain"),
                pl.col("line_no").filter(pl.col("is_exc")).alias("chain_lines"),
                pl.col("_f").filter(pl.col("is_frame")).last().alias("innermost"),
                pl.col("msg").str.join("\n").alias("text"),
            )
            .filter((pl.col("frames") > 0) & (pl.col("chain").list.len() > 0))
        )
        chain_text = pl.col("chain").list.join(" → ")
        innermost = pl.format(
            "{}:{} in {}",
            pl.col("innermost").struct.field("file"),
            pl.col("innermost").struct.field("lineno"),
            pl.col("innermost").struct.field("func"),
        )
        network_kind = first_kind(NETWORK_KINDS, pl.col("text"))
        engine_kind = first_kind(ENGINE_KINDS, pl.col("text"))
        blocks = blocks.with_columns(
            pl.format("{} (innermost frame {})", chain_text, innermost).alias("detail"),
            network_kind.alias("network_kind"),
            engine_kind.alias("engine_kind"),
            pl.col("text")
            .str.extract(r"send_error\((\d{3})", 1)
            .cast(pl.Int64)
            .alias("http_status"),
        )
        # cited by its deciding line: the exception that names its kind ("TimeoutError: timed
        # out"), else its first exception; never the banner or separator the block opens with
        blocks = blocks.with_columns(deciding_line(blocks).alias("line_no")).with_columns(
            source_expr(source.display).alias("source")
        )
        proxy = blocks.filter(pl.col("engine_kind").is_null()).select(
            "at",
            pl.when(pl.col("_role") == "proxy")
            .then(None)
            .otherwise(pl.col("instance"))
            .alias("instance"),
            pl.coalesce("network_kind", pl.lit("exception")).alias("kind"),
            "http_status",
            "detail",
            "source",
        )
        engine = blocks.filter(pl.col("engine_kind").is_not_null()).select(
            "instance", "at", pl.col("engine_kind").alias("kind"), "detail", "source"
        )
        used = blocks["members"].explode()
        # A threaded server interleaves: a block's banner and "Traceback …" line can stand
        # apart from its frames (read as a block of their own). Such framing is noise.
        framing = marked.filter(pl.col("is_chain") & ~pl.col("line_no").is_in(used.implode()))
        return Claim(
            records=used,
            noise=framing["line_no"],
            tables={"proxy_events": proxy, "engine_events": engine},
        )
