"""Load testers' result files → `client_requests`, one module a tool.

Clocks. Every format's times are first read as seconds on the file's own
clock (`_start`, `_end`). Seconds ≥ 1e9 are epoch time; smaller values are a
counter with an arbitrary zero (``perf_counter``, "seconds since the test
began") and need an anchor: the file's own (vLLM's ``date``), else
``ParseContext.client_anchor`` (``--started-at``, taken as the first
request's start), else the requests keep no time, still count in the totals,
and a note says they cannot be placed on the servers' clock. Every file's
notes say how its absolute times were obtained.

Whole-document JSON is loaded once with ``json.loads``; a document cut short
is read as far as it goes (complete records are salvaged) and the rest of its
lines are reported unparsed. JSON-lines formats are decoded by polars; a bad
line is counted, never fatal.
"""
