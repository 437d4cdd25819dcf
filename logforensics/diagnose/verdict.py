"""The verdict, assembled in one place from every rule's reading.

Each rule says which failed requests it explains. Where one rule outranks
another (a dead instance explains the proxy's refused connects to it), the
outranked claim is dropped. A failure two causes still claim is contested:
the evidence points two ways for it. The primary cause explains the most
failures; the others with failures of their own are secondary, with their
share. The verdict is `inconclusive` when no cause is found, when the causes
found explain less than `explained_share` of the failures, or when contested
failures are as many as the primary's; then `missing` says what would decide.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import polars as pl

from logforensics.diagnose import (
    front_proxy,
    gpu,
    instance_failure,
    kv_cache,
    no_bottleneck,
    shared,
)
from logforensics.diagnose.evidence import DISCRIMINATING, Evidence, Rule, RuleResult, combine
from logforensics.diagnose.facts import Facts, build, span_text
from logforensics.diagnose.findings import Finding
from logforensics.diagnose.thresholds import Thresholds
from logforensics.model import Bottleneck, Step

RULES: tuple[Rule, ...] = (
    instance_failure.RULE,
    kv_cache.RULE,
    gpu.RULE,
    front_proxy.RULE,
    no_bottleneck.RULE,
)
BY_CAUSE = {rule.bottleneck: rule for rule in RULES}
INCONCLUSIVE_HEADLINE = "Inconclusive"


@dataclass
class Secondary:
    bottleneck: Bottleneck
    failures: int
    share: float
    confidence: float
    subject: str | None
    evidence: list[Evidence]

    def to_dict(self) -> dict:
        return {
            "bottleneck": self.bottleneck.value,
            "failures": self.failures,
            "share": round(self.share, 3),
            "confidence": round(self.confidence, 2),
            "subject": self.subject,
            "evidence": [e.to_dict() for e in self.evidence],
        }


@dataclass
class Verdict:
    bottleneck: Bottleneck
    confidence: float
    evidence: list[Evidence]
    summary: str
    recommendations: list[str]
    missing: list[str] = field(default_factory=list)  # what to collect next time
    failures: int = 0  # failed requests the primary cause explains
    share: float | None = None  # ... of all failed requests
    subject: str | None = None  # the instance or address the cause names, if one
    secondary: list[Secondary] = field(default_factory=list)
    contested: int = 0  # failed requests two causes explain
    unexplained: int = 0  # failed requests no cause explains
    findings: list[Finding] = field(default_factory=list)
    qualifiers: list[str] = field(default_factory=list)  # the primary's sub-causes, by name

    def to_dict(self) -> dict:
        return {
            "bottleneck": self.bottleneck.value,
            "confidence": round(self.confidence, 2),
            "summary": self.summary,
            "subject": self.subject,
            "failures": self.failures,
            "share": None if self.share is None else round(self.share, 3),
            "evidence": [e.to_dict() for e in self.evidence],
            "secondary": [s.to_dict() for s in self.secondary],
            "contested": self.contested,
            "unexplained": self.unexplained,
            "recommendations": self.recommendations,
            "missing": self.missing,
            "qualifiers": self.qualifiers,
        }


def diagnose(
    requests: pl.DataFrame,
    tables: dict[str, pl.DataFrame],
    offset_s: float,
    instances: list[str],
    t: Thresholds,
    runs: list[Step] | None = None,
    coverage: dict[str, tuple[dt.datetime, dt.datetime]] | None = None,
    upstreams: dict[str, str | None] | None = None,
) -> Verdict:
    """`requests`: the client's requests with the correlation stage's columns; `coverage`:
    each instance log's span; `upstreams`: proxy upstream address → instance."""
    facts = build(requests, tables, offset_s, instances, t.stats_pad_s, coverage, runs, upstreams)
    results = {rule.bottleneck: rule.evaluate(facts, t) for rule in RULES}
    for rule, result in zip(RULES, results.values(), strict=True):
        for e in result.evidence:
            e.supports = rule.bottleneck.value
    return assemble(facts, results, t)


def assemble(facts: Facts, results: dict[Bottleneck, RuleResult], t: Thresholds) -> Verdict:
    missing = _missing_inputs(facts)
    if not facts.sent:
        return _inconclusive([], missing, "no request results were found")
    if not facts.failed:
        return _without_failures(facts, results, t, missing)
    claims = _resolve(results)
    n_causes = claims.select(pl.sum_horizontal(claims.columns).alias("n"))["n"]
    exclusive = {Bottleneck(b): int((claims[b] & (n_causes == 1)).sum()) for b in claims.columns}
    found = sorted(
        (b for b, n in exclusive.items() if n and results[b].score >= t.min_confidence),
        key=lambda b: (-exclusive[b], -results[b].score),
    )
    contested = facts.failures.filter(n_causes >= 2)
    unexplained = facts.failures.filter(n_causes == 0)
    missing += [m for r in results.values() for m in r.missing]
    missing += _unexplained_needs(facts, unexplained) + _contested_needs(
        claims, n_causes, contested
    )
    fired = [e for r in results.values() for e in r.evidence]
    counts = {"contested": contested.height, "unexplained": unexplained.height}
    two_ways = (
        f"for {contested.height} of the {facts.failed} failures the evidence points two ways "
        f"({' and '.join(_contesting(claims, n_causes))})"
    )
    if not found:
        why = (
            two_ways
            if contested.height
            else f"nothing in the logs tells what failed the {facts.failed} request(s)"
        )
        return _inconclusive(fired, missing, why, **counts)
    primary = found[0]
    explained = sum(exclusive[b] for b in found)
    if explained / facts.failed < t.explained_share:
        causes_text = ", ".join(
            f"{_in_sentence(BY_CAUSE[b].headline)} {exclusive[b]}" for b in found
        )
        why = (
            f"the evidence explains only {explained} of the {facts.failed} failures ({causes_text})"
        )
        return _inconclusive(fired, missing, why, **counts)
    if contested.height >= exclusive[primary]:
        return _inconclusive(fired, missing, two_ways, **counts)
    corroboration = shared.evaluate(facts, t)
    secondary = [
        Secondary(
            b,
            exclusive[b],
            exclusive[b] / facts.failed,
            _confidence(results[b], corroboration),
            results[b].subject,
            _ordered(results[b].evidence + _corroborating(b, corroboration)),
        )
        for b in found[1:]
    ]
    rule = BY_CAUSE[primary]
    qualified = results[primary].qualifiers
    summary = _sentence(rule, results[primary], exclusive[primary], facts)
    for s in secondary:
        summary += (
            f" Also {_in_sentence(BY_CAUSE[s.bottleneck].headline)}: {s.failures} of "
            f"{facts.failed} ({s.share:.0%})."
        )
    recommendations = [r for q in qualified for r in q.recommendations]
    recommendations += list(rule.recommendations) + [
        f"For the {s.failures} failure(s) on {_in_sentence(BY_CAUSE[s.bottleneck].headline)}: "
        f"{BY_CAUSE[s.bottleneck].recommendations[0]}"
        for s in secondary
    ]
    evidence = results[primary].evidence + _corroborating(primary, corroboration)
    return Verdict(
        bottleneck=primary,
        confidence=_confidence(results[primary], corroboration),
        evidence=_ordered(evidence),
        summary=summary,
        recommendations=recommendations,
        missing=list(dict.fromkeys(missing)),
        failures=exclusive[primary],
        share=exclusive[primary] / facts.failed,
        subject=results[primary].subject,
        secondary=secondary,
        contested=contested.height,
        unexplained=unexplained.height,
        findings=[f for b in found for f in results[b].findings],
        qualifiers=[q.name for q in qualified],
    )


def _resolve(results: dict[Bottleneck, RuleResult]) -> pl.DataFrame:
    """One Boolean column a cause (named by its value): the failures it explains, after
    outranking."""
    claims = pl.DataFrame({b.value: r.claims for b, r in results.items()})
    for rule in RULES:
        if rule.bottleneck.value not in claims.columns:
            continue
        for lower in rule.outranks:
            if lower.value in claims.columns:
                claims = claims.with_columns(
                    (pl.col(lower.value) & ~pl.col(rule.bottleneck.value)).alias(lower.value)
                )
    return claims


def _corroborating(cause: Bottleneck, corroboration: list[Evidence]) -> list[Evidence]:
    if not BY_CAUSE[cause].corroborated:
        return []
    return [Evidence(**{**e.__dict__, "supports": cause.value}) for e in corroboration]


def _confidence(result: RuleResult, corroboration: list[Evidence]) -> float:
    weights = [e.weight for e in result.evidence if e.role == DISCRIMINATING]
    if weights and BY_CAUSE[result.bottleneck].corroborated:
        weights += [e.weight for e in corroboration]
    return combine(weights)


def _ordered(evidence: list[Evidence]) -> list[Evidence]:
    """Discriminating first, then by weight."""
    return sorted(evidence, key=lambda e: (e.role != DISCRIMINATING, -e.weight))


def cause_words(bottleneck: str) -> str:
    """A verdict's value in the words its rule's headline uses, inside a sentence."""
    rule = (
        BY_CAUSE.get(Bottleneck(bottleneck))
        if bottleneck in Bottleneck._value2member_map_
        else None
    )
    return _in_sentence(rule.headline) if rule else bottleneck.replace("_", " ")


def qualified_words(bottleneck: str, qualifiers: list[str]) -> str:
    """A verdict's qualifiers in its rule's words, e.g. " (shed at the front)"; "" for none."""
    rule = (
        BY_CAUSE.get(Bottleneck(bottleneck))
        if bottleneck in Bottleneck._value2member_map_
        else None
    )
    words = {q.name: q.words for q in rule.qualifiers} if rule else {}
    named = [words.get(q, q.replace("_", " ")) for q in qualifiers]
    return f" ({', '.join(named)})" if named else ""


def _in_sentence(headline: str) -> str:
    """A headline inside a sentence: "The KV cache" → "the KV cache", "GPU compute" stays."""
    if len(headline) > 1 and headline[1].isupper():
        return headline
    return headline[0].lower() + headline[1:]


def _sentence(rule: Rule, result: RuleResult, claimed: int, facts: Facts) -> str:
    """The rule's summary, or its first qualifier's where the result names one."""
    summary = result.qualifiers[0].summary if result.qualifiers else rule.summary
    text = summary.format(
        claimed=claimed,
        failed=facts.failed,
        sent=facts.sent,
        subject=result.subject or "an instance",
    )
    words = "".join(f", {q.words}" for q in result.qualifiers)
    return f"{rule.headline}{words}: {text}."


# What a cause looks like when every request succeeded (a death outranks a saturation)
HIDDEN_BY_SUCCESS = {
    Bottleneck.INSTANCE_FAILURE: "failed during the test, and the proxy's retries hid it",
    Bottleneck.KV_CACHE: "reached its limit",
    Bottleneck.GPU: "reached its limit",
}


def _without_failures(
    facts: Facts, results: dict[Bottleneck, RuleResult], t: Thresholds, missing: list[str]
) -> Verdict:
    """Every request succeeded: a bottleneck only if an instance died (the proxy's retries
    hid it) or an engine saturated."""
    found = sorted(
        (
            b
            for b in HIDDEN_BY_SUCCESS
            if results[b].evidence and results[b].score >= t.min_confidence
        ),
        key=lambda b: (b != Bottleneck.INSTANCE_FAILURE, -results[b].score),
    )
    cause = found[0] if found else Bottleneck.NONE
    rule, result = BY_CAUSE[cause], results[cause]
    if cause == Bottleneck.NONE:
        summary = _sentence(rule, result, 0, facts)
    else:
        summary = (
            f"{rule.headline}: no request failed ({facts.sent} sent), but "
            f"{result.subject or 'an instance'} {HIDDEN_BY_SUCCESS[cause]}."
        )
    return Verdict(
        bottleneck=cause,
        confidence=combine([e.weight for e in result.evidence]),
        evidence=_ordered(result.evidence),
        summary=summary,
        recommendations=list(rule.recommendations),
        missing=missing,
        subject=result.subject,
    )


def _inconclusive(
    evidence: list[Evidence],
    missing: list[str],
    why: str,
    contested: int = 0,
    unexplained: int = 0,
) -> Verdict:
    return Verdict(
        bottleneck=Bottleneck.INCONCLUSIVE,
        confidence=0.0,
        evidence=_ordered(evidence),
        summary=f"{INCONCLUSIVE_HEADLINE}: {why}.",
        recommendations=[],
        missing=list(dict.fromkeys(missing)),
        contested=contested,
        unexplained=unexplained,
    )


def _missing_inputs(facts: Facts) -> list[str]:
    out = []
    if not facts.instances:
        out.append("the instances' logs (vLLM stdout with uvicorn access lines)")
    if facts.stats.is_empty():
        out.append("vLLM's periodic stats lines (keep the engine's INFO logging on)")
    if not facts.sent:
        out.append("the load-test client's per-request results")
    return out


def _unexplained_needs(facts: Facts, unexplained: pl.DataFrame) -> list[str]:
    """For the failures no cause explains: the evidence that would, where and when."""
    out = []
    rejected = unexplained.filter(pl.col("client_error"))
    if rejected.height:
        codes = ", ".join(rejected["failure_class"].unique().sort().to_list())
        out.append(
            f"why the server rejected {rejected.height} request(s) ({codes}): a client error, "
            "not a capacity limit; the response bodies (the client's error text) would say"
        )
    unexplained = unexplained.filter(~pl.col("client_error"))
    reached = unexplained.filter(pl.col("reach") == "reached")
    placed = reached.filter(pl.col("target").is_not_null())
    preempted = kv_cache.preempted_instances(facts)
    for (name,), group in placed.group_by("target", maintain_order=True):
        span = span_text(group["w_start"].min(), group["w_end"].max())
        seen = facts.window_stats.filter(
            pl.col("fid").is_in(group["fid"].implode()) & (pl.col("instance") == name)
        )
        if seen.is_empty():
            known = " (it recorded preemptions, but not when)" if name in preempted else ""
            out.append(f"vLLM stats lines or a /metrics scrape covering {span} on {name}{known}")
            continue
        kv, waiting = seen["kv_pct"].max(), seen["waiting"].max()
        kv_text = "not reported" if kv is None else f"up to {kv:g}%"
        out.append(
            f"what held up {group.height} failed request(s) on {name} during {span}: its stats "
            f"show KV cache {kv_text} and up to {waiting} waiting, no limit the rules "
            "recognise; a /metrics scrape before and after the test "
            "(vllm:num_preemptions_total, vllm:num_requests_waiting) would tell"
        )
    unplaced = reached.filter(pl.col("target").is_null())
    if unplaced.height:
        out.append(
            f"which instance each of the {unplaced.height} failed request(s) during "
            f"{span_text(unplaced['w_start'].min(), unplaced['w_end'].max())} reached: request "
            "ids both sides log (X-Request-Id), vLLM's request logging (--enable-log-requests), "
            "or the proxy's upstream address per request mapped to an instance (--upstream)"
        )
    unknown = unexplained.filter(pl.col("reach") == "unknown")
    if unknown.height:
        out.append(
            f"logs covering {span_text(unknown['w_start'].min(), unknown['w_end'].max())} from "
            f"every instance: {unknown.height} failure(s) fall outside some instance's log, or a "
            "log is missing"
        )
    return out


def _contesting(claims: pl.DataFrame, n_causes: pl.Series) -> list[str]:
    """The causes that claim some failure together with another."""
    rows = claims.filter(n_causes >= 2)
    return [b for b in claims.columns if rows[b].any()]


def _contested_needs(
    claims: pl.DataFrame, n_causes: pl.Series, contested: pl.DataFrame
) -> list[str]:
    if contested.is_empty():
        return []
    causes = _contesting(claims, n_causes)
    return [
        f"which instance each of the {contested.height} failed request(s) during "
        f"{span_text(contested['w_start'].min(), contested['w_end'].max())} reached (the evidence "
        f"points to {' and '.join(causes)}): request ids both sides log, vLLM's request logging "
        "(--enable-log-requests), or the proxy's upstream per request"
    ]
