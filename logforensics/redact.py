"""`--redact`: an Analysis fit for a ticket that leaves the team.

`redact(analysis)` returns a copy in which prompt text and prompt markers,
request ids, and IP addresses (client peers, ``ip:port``, addresses quoted in
errors and log lines) are replaced by stable placeholders: the same value
always gets the same placeholder within one report (``prompt-3``,
``request-12``, ``client-1``; an address first seen outside a peer column is
``host-N``). Ports are kept (``client-1:5555``): they identify connections,
not machines. Sources (``file:line``) and input paths stay, so every number can
still be traced by whoever holds the logs.

Redaction is applied to the data, before rendering, so the HTML, JSON and
Markdown reports and the ``--ledger`` file are redacted alike; the log lines
a report quotes, read later, go through the same `Redactor.text`
(`Analysis.redact_text`), so a value has one placeholder everywhere. The
mapping (`Redactor.mapping`) is never written into a report.
"""

from __future__ import annotations

import dataclasses
import re

import polars as pl

from logforensics import model
from logforensics.analysis import Analysis, Finding

# Columns that are traceability or vocabulary, never redacted.
KEEP_COLUMNS = {
    "source",
    "server_source",
    "run",
    "instance",
    "proxy",
    "kind",
    "event",
    "method",
    "match_key",
    "reach",
    "status_origin",
    "delivery",
    "proxy_delivery",
    "proxy_instance",
    "reached_instance",
    "reach_witness",
    "outcome",
}
MARKER_COLUMNS = {"marker", "prompt_marker"}
REQUEST_ID_COLUMNS = {"request_id"}
PEER_COLUMNS = {"client"}  # the address that called a proxy
MIN_FREE_TEXT_TOKEN = 6  # shorter known ids/markers ("(3)") are not hunted in free text

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = rf"(?<![\d.])(?<!version )(?<![vV]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)"
_H = r"[0-9A-Fa-f]{1,4}"
IPV6 = (
    rf"(?<![\w:.])(?=[0-9A-Fa-f:]*[0-9A-Fa-f])(?:(?:{_H}:){{7}}{_H}"
    rf"|(?:{_H}(?::{_H})*)?::(?:{_H}(?::{_H})*)?)(?![\w:])"
)
# an address, optionally with its port: 10.1.2.3:5555, [fe80::1]:5555, or the bare address
ADDRESS_RE = re.compile(rf"(?P<open>\[)?(?P<addr>{IPV4}|{IPV6})(?(open)\])(?P<port>:\d{{1,5}}\b)?")
PROMPT_RE = re.compile(
    r"""(?P<prompt>\bprompt: (?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|['"].*$))"""
    r"""|(?P<content>"(?P<key>content|prompt)"\s*:\s*(?:"(?:[^"\\]|\\.)*"|".*$))"""
    r"""|(?P<tokens>\bprompt_token_ids: \[[^\]]*(?:\]|$))"""
    r"""|(?P<marker>\[lf-[\w.-]+\])"""
    r"""|(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)"""
    r"""|(?P<cmpl>\b(?:chat)?cmpl-[\w-]+)"""
    r"""|(?P<word>(?<![\w.-])[\w][\w.-]{4,}[\w])"""
)
ID_PREFIX_RE = re.compile(r"^((?:chat)?cmpl-)?(.*)$", re.S)
ID_SUFFIX_RE = re.compile(r"^(.*?)(-\d+)$", re.S)
MARKER_IN_TEXT_RE = re.compile(r"\[lf-[\w.-]+\]|\(\d+\)")


class Redactor:
    """Stable placeholders for one report: same value in, same placeholder out."""

    def __init__(self, protected: list[str] | None = None):
        self.prompts: dict[str, str] = {}
        self.ids: dict[str, str] = {}
        self.addresses: dict[str, str] = {}
        self._counts = {"prompt": 0, "request": 0, "client": 0, "host": 0}
        # texts kept verbatim inside free text (input paths: sources stay)
        self.protected = sorted({p for p in (protected or []) if p}, key=len, reverse=True)

    @property
    def mapping(self) -> dict[str, dict[str, str]]:
        """original → placeholder, per kind (for the user's own records, never in a report)."""
        return {"prompts": self.prompts, "request_ids": self.ids, "addresses": self.addresses}

    def _new(self, kind: str) -> str:
        self._counts[kind] += 1
        return f"{kind}-{self._counts[kind]}"

    # ---------------------------------------------------------------- values

    def prompt(self, marker_or_text: str) -> str:
        key = marker_or_text.strip()
        if key not in self.prompts:
            self.prompts[key] = self._new("prompt")
        return self.prompts[key]

    def request_id(self, raw: str) -> str:
        """chatcmpl-<id>-0 and <id> share a placeholder; vLLM's prefix and suffix are kept."""
        prefix, core = ID_PREFIX_RE.match(raw).groups()
        prefix = prefix or ""
        if core in self.ids:
            return prefix + self.ids[core]
        m = ID_SUFFIX_RE.match(core)
        if prefix and m and m.group(1) in self.ids:
            return prefix + self.ids[m.group(1)] + m.group(2)
        self.ids[core] = self._new("request")
        return prefix + self.ids[core]

    def address(self, addr: str, role: str = "host") -> str:
        addr = addr.strip("[]").lower()
        if addr not in self.addresses:
            self.addresses[addr] = self._new(role)
        return self.addresses[addr]

    def peer(self, value: str) -> str:
        """A peer column: host[:port] whatever the host is (an IP or a name)."""
        m = re.fullmatch(r"\[?(?P<host>.*?)\]?(?P<port>:\d{1,5})?", value.strip())
        host, port = (m.group("host"), m.group("port") or "") if m else (value, "")
        if not host:
            return value
        return self.address(host, "client") + port

    # ---------------------------------------------------------------- free text

    def text(self, value: str) -> str:
        """Prompts, markers, request ids and addresses in arbitrary text (a log line, an error)."""
        if not value:
            return value
        saved: list[str] = []

        def protect(m: re.Match) -> str:
            saved.append(m.group(0))
            return f"\x00{len(saved) - 1}\x00"

        if self.protected:
            value = re.sub("|".join(map(re.escape, self.protected)), protect, value)
        value = PROMPT_RE.sub(self._prompt_match, value)
        value = ADDRESS_RE.sub(self._address_match, value)
        if saved:
            value = re.sub(r"\x00(\d+)\x00", lambda m: saved[int(m.group(1))], value)
        return value

    def _prompt_match(self, m: re.Match) -> str:
        kind = m.lastgroup
        text = m.group(0)
        if kind in ("prompt", "content"):
            marker = MARKER_IN_TEXT_RE.findall(text)
            placeholder = self.prompt(marker[-1] if marker else text)
            if kind == "prompt":
                return f"prompt: '<{placeholder}>'"
            return f'"{m.group("key")}": "<{placeholder}>"'
        if kind == "tokens":
            return "prompt_token_ids: [redacted]"
        if kind == "marker":
            return self.prompt(text)
        if kind in ("uuid", "cmpl"):
            return self.request_id(text)
        # a word: only a value already known as a marker or request id is replaced
        if text in self.prompts:
            return self.prompts[text]
        core = ID_PREFIX_RE.match(text).group(2)
        if core in self.ids or (text.startswith(("cmpl-", "chatcmpl-")) and core):
            return self.request_id(text)
        return text

    def _address_match(self, m: re.Match) -> str:
        placeholder = self.address(m.group("addr"))
        if m.group("open"):
            placeholder = f"[{placeholder}]"
        return placeholder + (m.group("port") or "")

    # ---------------------------------------------------------------- frames

    def seed(self, frame: pl.DataFrame, order: list[str]) -> None:
        """Number structured values first, in time order, so placeholders read naturally."""
        if frame.is_empty():
            return
        cols = [c for c in order if c in frame.columns]
        if cols:
            frame = frame.sort(cols, nulls_last=True)
        for col in frame.columns:
            if not _is_text(frame.schema[col]):
                continue
            values = frame[col].drop_nulls().unique(maintain_order=True).to_list()
            if col in MARKER_COLUMNS:
                for v in values:
                    self.prompt(v)
            elif col in REQUEST_ID_COLUMNS:
                for v in values:
                    if not v.startswith(("cmpl-", "chatcmpl-")):
                        self.request_id(v)
                for v in values:
                    self.request_id(v)
            elif col in PEER_COLUMNS:
                for v in values:
                    self.peer(v)

    def frame(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Every text column of a table, redacted; the `source` columns kept."""
        replaced = []
        for col, dtype in frame.schema.items():
            if not _is_text(dtype) or col in KEEP_COLUMNS or frame.is_empty():
                continue
            if col in MARKER_COLUMNS:
                fn = self.prompt
            elif col in REQUEST_ID_COLUMNS:
                fn = self.request_id
            elif col in PEER_COLUMNS:
                fn = self.peer
            else:
                fn = self.text
            values = frame[col].drop_nulls().unique(maintain_order=True).to_list()
            mapping = {v: fn(v) for v in values}
            changed = {k: v for k, v in mapping.items() if k != v}
            if changed:
                replaced.append(pl.col(col).cast(pl.Utf8).replace(changed).cast(dtype))
        return frame.with_columns(replaced) if replaced else frame


def _is_text(dtype: pl.DataType) -> bool:
    """A column of text: strings, or labels (the tables' categoricals, `model.LABEL`)."""
    return dtype == pl.Utf8 or dtype == model.LABEL


def _strings(value, fn):
    """Apply `fn` to every string inside plain data (dicts, lists, tuples)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {k: _strings(v, fn) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, fn) for v in value]
    if isinstance(value, tuple):
        return tuple(_strings(v, fn) for v in value)
    return value


REDACTED_NOTE = (
    "prompts and markers, request ids and IP addresses are replaced by placeholders "
    "(prompt-N, request-N, client-N / host-N; the same value, the same placeholder); "
    "sources (file:line) are kept"
)


def redact(analysis: Analysis, redactor: Redactor | None = None) -> Analysis:
    """A redacted copy of `analysis`; the original is not changed."""
    paths = [f.path for f in analysis.inputs]
    r = redactor or Redactor(protected=paths)
    r.protected = sorted(set(r.protected) | {p for p in paths if p}, key=len, reverse=True)
    r.seed(analysis.requests, ["started_at", "source"])
    for name in sorted(analysis.tables):
        r.seed(analysis.tables[name], ["at", "started_at", "source"])
    changes = {}
    for f in dataclasses.fields(analysis):
        value = getattr(analysis, f.name)
        if isinstance(value, pl.DataFrame):
            changes[f.name] = r.frame(value)
        elif f.name == "tables":
            changes[f.name] = {k: r.frame(v) for k, v in value.items()}
        elif f.name == "findings":
            changes[f.name] = [dataclasses.replace(x, detail=r.text(x.detail)) for x in value] + [
                Finding("redacted", REDACTED_NOTE, "info")
            ]
        elif f.name == "inputs":
            changes[f.name] = [
                dataclasses.replace(
                    x,
                    unparsed_examples=[(n, r.text(t)) for n, t in x.unparsed_examples],
                    unparsed_shapes=[
                        {**s, "shape": r.text(s["shape"]), "example": r.text(s["example"])}
                        for s in x.unparsed_shapes
                    ],
                    notes=[r.text(n) for n in x.notes],
                    skipped=r.text(x.skipped) if x.skipped else x.skipped,
                )
                for x in value
            ]
        elif f.name == "errors":
            changes[f.name] = [r.text(e) for e in value]
        elif f.name == "verdict":
            changes[f.name] = dataclasses.replace(
                value,
                summary=r.text(value.summary),
                evidence=[
                    dataclasses.replace(e, value=_strings(e.value, r.text)) for e in value.evidence
                ],
            )
    changes["redact_text"] = r.text  # for the log lines the report reads later
    return dataclasses.replace(analysis, **changes)
