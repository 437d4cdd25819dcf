"""The correlation stage: one clock, who served each request, whether it reached anyone.

Modules, in the order the analysis runs them:

* `records`   — the server-side records a client request can leave;
* `clock`     — the client→server offset, and each instance's own;
* `pairing`   — the one order-preserving pairing every matcher uses;
* `attribute` — request id, prompt marker, then time windows: which instance;
* `proxy`     — the proxy's log: upstream addresses → instances, its verdict per request;
* `reach`     — reached / unreached / unknown, and the witness that decided;
* `steps`     — load steps, warm-up, contamination, per-step counts;
* `balance`   — how evenly the balancer spread the load.
"""
