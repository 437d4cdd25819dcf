"""Post-mortem of a failed LLM load test, from the logs everyone already has."""

import os

__version__ = "0.1.0"

# polars allocates through jemalloc, which keeps freed pages for 10 s before
# returning them. Parsing builds and drops large frames file after file, so
# on the 5M-line bench bundle that retention raised the peak RSS to 2.94 GB;
# returning pages after 1 s gave 2.22 GB (at once: 2.11 GB, but 40% slower,
# from page faults). After 3 s: at most 100 MB more than after 1 s, and 6–10%
# faster (the kernel's share of the time, refaulting returned pages, falls by
# a third: 5M 14.8–16.2 s against 16.5–17.2 s; 5M-short 7.3–7.7 s against
# 8.2–8.5 s). Read when polars loads, so it must be set before that; a value
# the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:3000,muzzy_decay_ms:0")
