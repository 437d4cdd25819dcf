"""Post-mortem of a failed LLM load test, from the logs everyone already has."""

import os

__version__ = "0.1.0"

# polars allocates through jemalloc, which keeps freed pages for 10 s before
# returning them. Parsing builds and drops large frames batch after batch, and what
# is kept grows with how fast it churns: on the 5M-line bench bundle a 10 s decay
# raised the peak RSS to 2.94 GB, 1 s gave 2.22 GB, returning pages at once 2.11 GB
# but 40% slower (page faults; 20M: 62 → 78 s). 0.5 s took no measurable time
# over the 3 s used before (CPU, alternated: 5M 31.7 → 31.9 s, 5M-short 17.9 →
# 18.0 s; 20M 92 → 98 s as the mean of three pairs, one 0.5 s run an outlier at
# 111 s) and peaks lower (20M 3,280 → 2,997 MiB, 5M ~1,070 → ~1,000 MB, 5M-short
# ~810 → ~740 MB). Read when polars loads, so it must be set before that; a value
# the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:500,muzzy_decay_ms:0")
