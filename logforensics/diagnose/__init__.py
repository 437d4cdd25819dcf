"""From evidence to a verdict: one module a rule, the verdict assembled in `verdict`.

Rules: `instance_failure`, `kv_cache`, `gpu`, `front_proxy`, `no_bottleneck`
(`none`); signals every engine-side cause shares: `shared`; the facts they all
read: `facts`; the numbers they compare against: `thresholds`.
"""

from logforensics.diagnose.evidence import Evidence, Rule, RuleResult, Signal
from logforensics.diagnose.findings import Finding
from logforensics.diagnose.thresholds import Thresholds
from logforensics.diagnose.verdict import (
    RULES,
    Secondary,
    Verdict,
    cause_words,
    diagnose,
    qualified_words,
)

__all__ = [
    "cause_words",
    "RULES",
    "Evidence",
    "Finding",
    "Rule",
    "RuleResult",
    "Secondary",
    "Signal",
    "Thresholds",
    "Verdict",
    "diagnose",
    "qualified_words",
]
