"""An instance the balancer caps at a fixed count, or sends nothing."""

from __future__ import annotations

from logforensics.diagnose import Finding
from logforensics.findings.base import FindingFacts, Kind

CAPPED_MIN_STEPS = 3  # an instance's count fixed across this many steps...
CAPPED_MIN_COUNT = 3  # ...at this many requests or more is a cap, not chance

KINDS = {
    "instance_capped": Kind(
        advice="Look for a per-upstream connection limit (max_conns, worker pool, keep-alive "
        "pool) on the path to that instance."
    ),
    "active_standby": Kind(
        advice="Check that every instance is in the balancer's pool and passes its health check."
    ),
}


def find(facts: FindingFacts) -> list[Finding]:
    measured, instances = facts.measured, facts.instances
    out = []
    if len(measured) < CAPPED_MIN_STEPS or len(instances) < 2:
        return out
    for name in instances:
        counts = [r.per_instance[name] for r in measured]
        served = [sum(r.per_instance.values()) for r in measured]
        if len(set(counts)) == 1 and counts[0] >= CAPPED_MIN_COUNT and max(served) > min(served):
            out.append(
                Finding(
                    "instance_capped",
                    f"{name} served exactly {counts[0]} in every step while the served total went "
                    f"{' → '.join(map(str, served))}: something on its path caps it",
                )
            )
        if sum(counts) == 0 and sum(served) > 0:
            out.append(
                Finding(
                    "active_standby",
                    f"{name} served no request in any step: the balancer treats it as standby, or "
                    "it is not in the pool",
                )
            )
    return out
