"""A request's outcome, from positive evidence only: one vocabulary for every client format.

``ok`` needs an explicit ok/success flag or word, a 2xx with no error, or
output tokens with no error. Anything that says the request failed is
classified; where nothing says either way the outcome is ``unknown`` (counted
and shown, never a silent success). The vocabulary:

* ``ok``
* ``timeout`` — the client gave up waiting (``timed out``, ``<urlopen error
  timed out>``, requests' ``Read timed out. (read timeout=30)``, httpx
  ``ReadTimeout``, aiohttp's empty ``TimeoutError``, openai ``APITimeoutError:
  Request timed out.``, WinError 10060, errno 110 / 60)
* ``refused`` — connection refused (errno 111 / 61, WinError 10061)
* ``reset`` — the connection broke without an answer (reset by peer, errno
  104 / 54, WinError 10054, ``Remote end closed connection without
  response``, httpx ``Server disconnected without sending a response.``,
  aiohttp ``ServerDisconnectedError``, broken pipe)
* ``http_<code>`` — the answer was an HTTP error (``http_503``, ``http_504``),
  from a status or from text (``HTTP Error 504: Gateway Time-out``,
  ``503 Server Error``, openai ``Error code: 503``)
* ``cancelled`` — the client cancelled it (GuideLLM ``incomplete``, AIPerf
  ``was_cancelled``, ``CancelledError``)
* ``error`` — a failure of another kind (error text present, or an explicit
  failure flag with no reason)
* ``unknown`` — nothing says either way.

The error texts were produced by running urllib, requests, httpx, aiohttp and
openai against a closed port, a full backlog, a slow stub, 503/504 stubs and
stubs that close or reset (tests/data/client_errors.json); the localised
Windows messages are quoted from public issue threads (tests/test_outcome.py).
"""

from __future__ import annotations

import polars as pl

OUTCOMES = ("ok", "timeout", "refused", "reset", "http_<code>", "cancelled", "error", "unknown")

# An HTTP status named in an error text. Checked before the words: nginx's
# "504 Gateway Time-out" is an HTTP answer, not a client timeout.
STATUS_IN_TEXT = (
    r"(?i)(?:HTTP Error |Error code: |status(?:[ _]?code)?[:= ]+|HTTP/[\d.]+ |^'?|Server error '"
    r"|Client error '|\bHTTP )([1-5]\d{2})\b(?:[ :,'\-]|$)"
    r"|(?:^|\s)([1-5]\d{2}) (?:Server|Client) Error\b"
    r"|(?:^|: )([1-5]\d{2}), message="
)
# class → pattern over "Type: message" text, in this order (English, errno / WinError
# numbers, then localised wordings seen in real reports).
TEXT_CLASSES = {
    "cancelled": r"(?i)\bcancell?ed\b|CancelledError|\baborted by (?:the )?client\b",
    "timeout": (
        r"(?i)timed? ?out|timeout|Time-out\b|deadline exceeded|\[(?:Errno (?:110|60)|WinError 10060)\]"
        r"|Zeitüberschreitung|délai d'attente|tiempo de espera|시간 초과|タイムアウト|超时|逾時"
        r"|没有正确答复"
    ),
    "refused": (
        r"(?i)refused|\[(?:Errno (?:111|61)|WinError 10061)\]|Cannot connect to host"
        r"|Failed to establish a new connection|verweigert|refusée|rechazada|rehusada"
        r"|거부|拒否|拒绝|拒絕"
    ),
    "reset": (
        r"(?i)reset by peer|connection reset|\[(?:Errno (?:104|54|32)|WinError 10054)\]"
        r"|Broken pipe|Remote ?end closed connection|RemoteDisconnected|Server ?disconnected"
        r"|Connection aborted|IncompleteRead|forcibly closed|zurückgesetzt"
        r"|vom Remotehost geschlossen|réinitialisée|재설정|强迫关闭|強制的に切断"
    ),
}
OK_WORDS = ["ok", "success", "succeeded", "successful", "completed", "done", "200 ok"]
FAILURE_WORDS = {
    "timeout": ["timeout", "timed_out", "timedout"],
    "cancelled": ["cancelled", "canceled", "incomplete", "aborted"],
    "error": ["error", "errored", "failed", "failure", "fail", "exception"],
}
NO_TEXT = ["", "none", "null", "nan", "-"]
WORDS = OK_WORDS + [w for words in FAILURE_WORDS.values() for w in words] + NO_TEXT


def _text_class(text: pl.Expr, status: pl.Expr) -> pl.Expr:
    """The class an error text names; a text that names none (``Internal Server Error``)
    takes the failing status its record holds, if any."""
    code = pl.coalesce(
        *(text.str.extract(STATUS_IN_TEXT, i).cast(pl.Int64, strict=False) for i in (1, 2, 3))
    )
    out = pl.when(code.is_between(400, 599)).then(pl.format("http_{}", code))
    for name, pattern in TEXT_CLASSES.items():
        out = out.when(text.str.contains(pattern)).then(pl.lit(name))
    out = out.when(status.is_between(400, 599)).then(pl.format("http_{}", status))
    return out.otherwise(pl.lit("error"))


def classify(
    *,
    ok: pl.Expr | None = None,
    http_status: pl.Expr | None = None,
    error: pl.Expr | None = None,
    status_word: pl.Expr | None = None,
    cancelled: pl.Expr | None = None,
    output_tokens: pl.Expr | None = None,
) -> pl.Expr:
    """The outcome of each request, from whatever its record holds (all optional).

    `ok` an explicit flag, `http_status` the answer's status, `error` the
    client's error text (``Type: message`` where the type is known),
    `status_word` a word such as ``ok`` / ``timeout`` / ``errored``,
    `cancelled` a flag, `output_tokens` the tokens received.
    """
    none = pl.lit(None)
    ok = pl.lit(None, dtype=pl.Boolean) if ok is None else ok.cast(pl.Boolean, strict=False)
    status = (none if http_status is None else http_status).cast(pl.Int64, strict=False)
    raw = (none if error is None else error).cast(pl.Utf8).str.strip_chars()
    has_error = raw.is_not_null() & ~raw.str.to_lowercase().is_in(NO_TEXT + OK_WORDS)
    error_says_ok = raw.str.to_lowercase().is_in(OK_WORDS).fill_null(False)
    word = (none if status_word is None else status_word).cast(pl.Utf8).str.strip_chars()
    word = word.str.to_lowercase()
    cancelled = pl.lit(False) if cancelled is None else cancelled.cast(pl.Boolean).fill_null(False)
    tokens = (none if output_tokens is None else output_tokens).cast(pl.Int64, strict=False)
    # A failure said anywhere wins over a 2xx (a stream can break after its headers).
    out = pl.when(cancelled).then(pl.lit("cancelled"))
    out = out.when(has_error).then(_text_class(raw, status))
    out = out.when(status.is_between(400, 599)).then(pl.format("http_{}", status))
    for name, words in FAILURE_WORDS.items():
        out = out.when(word.is_in(words)).then(pl.lit(name))
    out = out.when(ok.not_().fill_null(False)).then(pl.lit("error"))
    out = out.when(status.is_between(200, 299)).then(pl.lit("ok"))
    out = out.when(word.is_in(OK_WORDS) | ok.fill_null(False) | error_says_ok).then(pl.lit("ok"))
    out = out.when(tokens > 0).then(pl.lit("ok"))
    return out.otherwise(pl.lit("unknown")).alias("outcome")


def ok_of(outcome: pl.Expr) -> pl.Expr:
    """`ok` as the tables carry it: True only for ``ok``, null for ``unknown``, else False."""
    return pl.when(outcome == "unknown").then(None).otherwise(outcome == "ok").alias("ok")


def with_outcome(frame: pl.DataFrame, **evidence: pl.Expr | None) -> pl.DataFrame:
    """`frame` with its `outcome` column: `classify` over `evidence` (its keywords), run
    once per distinct evidence — a run's hundred thousand records repeat a few outcomes,
    and the regexes over error texts are the costly part."""
    given = {name: expr for name, expr in evidence.items() if expr is not None}
    if "output_tokens" in given:  # only "some tokens" is evidence: fewer distinct rows
        given["output_tokens"] = (given["output_tokens"].cast(pl.Int64, strict=False) > 0).cast(
            pl.Int64
        )
    if not given or frame.is_empty():
        return frame.with_columns(classify(**given))
    names = {name: f"_evidence_{name}" for name in given}
    seen = frame.select(*(expr.alias(names[name]) for name, expr in given.items()))
    keys = seen.unique().with_columns(classify(**{n: pl.col(c) for n, c in names.items()}))
    joined = seen.join(
        keys, on=list(names.values()), how="left", nulls_equal=True, maintain_order="left"
    )
    return frame.with_columns(joined["outcome"])
