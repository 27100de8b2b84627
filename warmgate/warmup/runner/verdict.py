"""Compare what the engine logged with what the plan expected, and decide the outcome."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.order import ListExpectation, WarmupOrder, bucket_digest
from warmgate.warmup.engine.parse import EngineLog, NotPrepared
from warmgate.warmup.runner.outcomes import Outcome

# vllm-gaudi runs graph warmup only without --enforce-eager (G26 hpu_model_runner.py:6171 /
# Gmain:6246) but logs "Warmup finished" either way (G26:6231 / Gmain:6306).
_EAGER_HINT = "--enforce-eager makes the engine skip graph warmup"
# No INFO record at all: the lines the verdict needs were filtered out (vllm/logger.py:59-66).
_LOGGING_HINT = (
    "the log holds no INFO record: VLLM_LOGGING_LEVEL above INFO, VLLM_CONFIGURE_LOGGING=0 or a "
    "custom logging config in the image hides the engine's lines"
)


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
class LogVerdict:
    """Every reason the engine's shapes differ from the plan, and the list checks behind them.

    ``unreadable`` holds what could not be told because every copy of a line was garbled: a
    retry can tell it, so it never counts as a mismatch.
    """

    checks: list[ListCheck] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)


def _sources(name: str) -> tuple[str, ...]:
    return {"prompt": ("prompt",), "decode": ("decode",)}.get(name, ("decode", "spec_decode"))


def _observed(log: EngineLog, name: str) -> list[tuple[int, int, int]] | None:
    # vllm-gaudi common.py: with k > 0, generate_spec_decode_buckets first logs only the
    # buckets it ADDED ("Generated 62 spec decode buckets ...", G26:357-361 / Gmain:365-369),
    # then log_generate_info the whole expanded list as "Generated 105 decode buckets ..."
    # (G26:233 / Gmain:241). The seeds are never logged: the decode list minus the added ones.
    lists = log.lists
    if any(key in log.copies and key not in lists for key in _sources(name)):
        return None  # a list it depends on was logged but is unreadable or disputed
    if name == "prompt":
        return lists.get("prompt")
    decode = lists.get("decode")
    added = lists.get("spec_decode")
    if name == "decode" or decode is None or added is None:
        return decode  # with k = 0 there is no spec line and seeds == decode buckets
    extra = set(added)
    return [row for row in decode if row not in extra]


def check_lists(plan: WarmupOrder, log: EngineLog) -> list[ListCheck]:
    """One ListCheck per list the plan has an expectation for."""
    checks = []
    for name, expected in sorted(plan.buckets.expected.items()):
        rows = _observed(log, name)
        if rows is None:
            checks.append(ListCheck(name, expected, None, None, None, "not readable (yet)"))
            continue
        digest = bucket_digest(rows)
        check = ListCheck(name, expected, len(rows), digest, digest == expected.digest)
        if name == "seed_decode" and "spec_decode" in log.lists:
            check.note = "derived: decode list minus the logged spec decode additions"
        checks.append(check)
    return checks


def _dropped_seeds(log: EngineLog) -> list[str]:
    reasons = []
    if log.omitted:
        seeds = "; ".join(f"{s.phase} {s.bucket} ({s.condition})" for s in log.omitted)
        reasons.append(f"engine dropped {len(log.omitted)} seed bucket(s) of the file: {seeds}")
    for phase in sorted(log.omitted_headers - {s.phase for s in log.omitted}):
        reasons.append(f"engine logged that it dropped {phase} seed buckets, records unreadable")
    return reasons


def early_mismatches(plan: WarmupOrder, log: EngineLog) -> list[str]:
    """Definite differences already visible while the engine warms up (used to stop early).

    Only readable lines count: a garbled copy of a list is never a reason to stop.
    """
    reasons = [
        f"{c.name} buckets: engine generated {c.observed_count} with digest "
        f"{c.observed_digest}, plan expects {c.expected.count} with {c.expected.digest}"
        for c in check_lists(plan, log)
        if c.match is False
    ]
    reasons += [
        f"engine processes logged different {key} lists ({', '.join(sorted(c.clean))})"
        for key, c in sorted(log.copies.items())
        if c.disagree()
    ]
    expected_kv = plan.kv_blocks_expected
    for blocks in sorted(log.kv_blocks_seen):
        if expected_kv is not None and blocks != expected_kv:
            reasons.append(f"KV blocks: engine has {blocks}, plan pins {expected_kv}")
    if len(log.kv_blocks_seen) > 1:
        counts = ", ".join(map(str, sorted(log.kv_blocks_seen)))
        reasons.append(f"engine processes reported different usable KV block counts: {counts}")
    reasons += _dropped_seeds(log)
    if "skipped_warmup" in log.flags:
        reasons.append("engine logged 'Skipping warmup...'")
    if "bucketing_off" in log.flags:
        reasons.append("engine logged 'Bucketing is OFF.'")
    return reasons


def _missing(log: EngineLog, verdict: LogVerdict) -> None:
    hint = "" if log.info_records else f" ({_LOGGING_HINT})"
    for check in verdict.checks:
        if check.observed_count is not None:
            continue
        logged = [log.copies[k] for k in _sources(check.name) if k in log.copies]
        if any(c.disagree() for c in logged):
            continue  # already a mismatch: processes disagree
        garbled = sum(len(c.garbled) for c in logged if c.agreed() is None)
        garbled += log.list_fragments
        if garbled:
            verdict.unreadable.append(
                f"no readable copy of the {check.name} bucket list ({garbled} garbled line(s): "
                "writes of several engine processes interleaved)"
            )
        else:
            verdict.mismatches.append(f"engine never logged its {check.name} bucket list{hint}")
    if not log.warmup_finished:
        verdict.mismatches.append(f"engine never logged 'Warmup finished in N secs'{hint}")
    elif not log.captured and "skipped_warmup" not in log.flags:
        verdict.mismatches.append(
            f"engine finished warmup without a 'Graph/... captured' line: {_EAGER_HINT}"
        )


def final_verdict(plan: WarmupOrder, log: EngineLog) -> LogVerdict:
    """All mismatches once the engine has stopped and its output is fully parsed."""
    verdict = LogVerdict(checks=check_lists(plan, log), mismatches=early_mismatches(plan, log))
    _missing(log, verdict)
    return verdict


def _fallback_config(entry: NotPrepared) -> str:
    """The configuration a fallback bucket runs, as _check_config logs it: a prompt's blocks
    are batch x ctx (R 3579-3588 / 3634-3643), e.g. Prompt (1, 8192, 1) -> ('prompt', 1, 8192,
    1)."""
    try:
        bs, query, ctx = (int(v) for v in entry.added.strip("() ").split(","))
    except ValueError:
        return entry.added
    return repr((entry.phase, bs, query, bs * ctx if entry.phase == "prompt" else ctx))


def _classified(log: EngineLog, known: Collection[str]) -> tuple[list[str], list[str]]:
    """(unwarmed, known gaps): every unwarmed configuration and fallback bucket, split by
    whether the plan lists its shape as one the engine's warmup cannot compile."""
    out: tuple[list[str], list[str]] = ([], [])
    for u in log.unwarmed:
        out[u.text in known].append(f"Configuration: {u.text} was not warmed-up!")
    for n in log.not_prepared:
        text = f"{n.phase.capitalize()} bucket for {n.requested} was not prepared (added {n.added})"
        out[_fallback_config(n) in known].append(text)
    return out


def unwarmed_reasons(log: EngineLog, known: Collection[str] = ()) -> list[str]:
    """Every unwarmed forward configuration and every fallback bucket (§4.3, §10 item 7), but
    those of the plan's known-unwarmable shapes (``known``: configuration reprs)."""
    return _classified(log, known)[0]


def known_gaps(log: EngineLog, known: Collection[str]) -> list[str]:
    """The unwarmed configurations and fallbacks of the plan's known-unwarmable shapes: the
    engine's warmup cannot compile them (docs/coverage.md), so they are reported, not failed."""
    return _classified(log, known)[1]


def decide(verdict: LogVerdict, unwarmed: list[str]) -> tuple[Outcome, str]:
    """The run's outcome once the engine has stopped: a definite mismatch first, then unwarmed
    shapes, then an unreadable log (a retry can tell), else verified."""
    if verdict.mismatches:
        return Outcome.PLAN_MISMATCH, verdict.mismatches[0]
    if unwarmed:
        return Outcome.UNWARMED_SHAPES, unwarmed[0]
    if verdict.unreadable:
        return Outcome.LOG_UNREADABLE, verdict.unreadable[0]
    return Outcome.VERIFIED, "every planned shape was warmed; no unwarmed shape seen"
