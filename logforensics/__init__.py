"""Post-mortem of a failed LLM load test, from the logs everyone already has."""

import os

__version__ = "0.1.0"

# polars allocates through jemalloc, which by default keeps freed pages for
# seconds before returning them. Parsing builds and drops large frames file
# after file, so that retention alone added about 1.4 GB to the peak of a
# 5M-line run (bench/RESULTS.md). Returning pages at once costs no
# measurable time here. Read when polars loads, so it must be set before that;
# a value the user set is kept.
os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:0,muzzy_decay_ms:0")
