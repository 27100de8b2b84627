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
    # vllm-gaudi common.py: with k > 0, generate_spec_decode_buckets first logs only the
    # buckets it ADDED ("Generated 62 spec decode buckets ...", §6 "62 added"), then
    # log_generate_info logs the full expanded list as "Generated 105 decode buckets ...".
    # The seeds are never logged; they are the decode list minus the added ones.
    if name == "prompt":
        return log.lists.get("prompt")
    decode = log.lists.get("decode")
    added = log.lists.get("spec_decode")
    if name == "decode" or decode is None or added is None:
        return decode  # with k = 0 there is no spec line and seeds == decode buckets
    extra = set(added)
    return [row for row in decode if row not in extra]


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
        if name == "seed_decode" and "spec_decode" in log.lists:
            check.note = "derived: decode list minus the logged spec decode additions"
        checks.append(check)
    return checks


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
    verdict.mismatches += [
        f"log: {p}" for key in sorted(log.list_problems) for p in log.list_problems[key]
    ]
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
