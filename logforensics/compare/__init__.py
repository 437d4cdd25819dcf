"""`logforensics compare`: did the change help? Runs side by side, with the evidence of why.

Each run is read into the records `analyze` builds (report.summary: a JSON report read back,
or evidence analysed afresh); `build` matches their steps and measures the two sides;
`RENDERERS` write the Comparison.
"""

from logforensics.compare.build import ManifestError, Run, build, read_manifest, read_run
from logforensics.compare.gates import held, parse_gate
from logforensics.compare.model import Comparison
from logforensics.compare.render import RENDERERS

__all__ = [
    "RENDERERS",
    "Comparison",
    "ManifestError",
    "Run",
    "build",
    "held",
    "parse_gate",
    "read_manifest",
    "read_run",
]
