"""Compare what the engine logged with what the plan expected, and decide the outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from warmgate.warmup.logparse import EngineLog
from warmgate.warmup.plan import ListExpectation, Plan, bucket_digest


@dataclass
class ListCheck:
    """One expected list against the engine's: ``match`` is None when it cannot be told yet."""

    name: str
    expected: ListExpectation
    observed_count: int | None
    observed_digest: str | None
    match: bool | None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the report."""
        return {
            "expected_count": self.expected.count,
            "expected_digest": self.expected.digest,
            "observed_count": self.observed_count,
            "observed_digest": self.observed_digest,
            "match": self.match,
            "note": self.note,
        }


@dataclass
class Verdict:
    """Every reason the engine's shapes differ from the plan, and the list checks behind them."""

    checks: list[ListCheck] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)


def _observed(log: EngineLog, name: str) -> list[tuple[int, int, int]] | None:
    # §1 item 2: with k > 0 the engine logs the expanded list as "spec decode buckets"; the
    # plain "decode buckets" line then holds the seeds (or, if logged after the replacement,
    # the expanded list again; _check_seed accepts that case as "not logged separately").
    # With k = 0 there is no spec line and seeds == decode buckets.
    if name == "prompt":
        return log.lists.get("prompt")
    if name == "decode" and "spec_decode" in log.lists:
        return log.lists["spec_decode"]
    return log.lists.get("decode")


def check_lists(plan: Plan, log: EngineLog) -> list[ListCheck]:
    """One ListCheck per list the plan has an expectation for."""
    checks = []
    for name, expected in sorted(plan.buckets.expected.items()):
        rows = _observed(log, name)
        if rows is None:
            checks.append(ListCheck(name, expected, None, None, None, "not logged (yet)"))
            continue
        digest = bucket_digest(rows)
        check = ListCheck(name, expected, len(rows), digest, digest == expected.digest)
        if name == "seed_decode" and not check.match:
            _check_seed(check, plan, digest)
        checks.append(check)
    return checks


def _check_seed(check: ListCheck, plan: Plan, digest: str) -> None:
    final = plan.buckets.expected.get("decode")
    if final is not None and digest == final.digest:
        check.match = None
        check.note = "engine logged the expanded list on its decode line; seeds not logged"


def early_mismatches(plan: Plan, log: EngineLog) -> list[str]:
    """Definite differences already visible while the engine warms up (used to stop early)."""
    reasons = [
        f"{c.name} buckets: engine generated {c.observed_count} with digest "
        f"{c.observed_digest}, plan expects {c.expected.count} with {c.expected.digest}"
        for c in check_lists(plan, log)
        if c.match is False
    ]
    expected_kv = plan.kv_blocks_expected
    if expected_kv is not None and log.kv_blocks is not None and log.kv_blocks != expected_kv:
        reasons.append(f"KV blocks: engine has {log.kv_blocks}, plan pins {expected_kv}")
    for phase, rows in sorted(log.omitted.items()):
        reasons.append(f"engine omitted {len(rows)} {phase} bucket(s) of the seed file")
    if "skipped_warmup" in log.flags:
        reasons.append("engine logged 'Skipping warmup...'")
    if "bucketing_off" in log.flags:
        reasons.append("engine logged 'Bucketing is OFF.'")
    return reasons


def final_verdict(plan: Plan, log: EngineLog) -> Verdict:
    """All mismatches once the engine has stopped and its output is fully parsed."""
    verdict = Verdict(checks=check_lists(plan, log), mismatches=early_mismatches(plan, log))
    for check in verdict.checks:
        if check.observed_count is None:
            verdict.mismatches.append(f"engine never logged its {check.name} bucket list")
    verdict.mismatches += [f"log: {p}" for p in log.problems if "bucket list" in p]
    if not log.warmup_finished:
        verdict.mismatches.append("engine never logged 'Warmup finished in N secs'")
    return verdict


def unwarmed_reasons(log: EngineLog) -> list[str]:
    """Every unwarmed forward configuration and every fallback bucket (§4.3, §10 item 7)."""
    reasons = [f"Configuration: {u.text} was not warmed-up!" for u in log.unwarmed]
    reasons += [
        f"{n.phase.capitalize()} bucket for {n.requested} was not prepared (added {n.added})"
        for n in log.not_prepared
    ]
    return reasons
