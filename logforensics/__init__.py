"""Post-mortem of a failed LLM load test, from the logs everyone already has."""

import os

__version__ = "0.1.0"

# polars allocates through jemalloc, which keeps freed pages for 10 s before
# returning them. Parsing builds and drops large frames file after file, so
# on the 5M-line bench bundle that retention raised the peak RSS to 2.94 GB;
# returning pages after 1 s gives 2.22 GB for 0.4 s more (at once: 2.11 GB,
# but 40% slower, from page faults). Read when polars loads, so it must be
# set before that; a value the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:1000,muzzy_decay_ms:0")
