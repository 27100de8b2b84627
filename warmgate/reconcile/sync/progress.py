"""Warmup progress, pure: the runner's status document -> status.warmup.progress, rate-limited.

The runner of the warmup Pod serves ``GET /warmgate/status`` (warmgate/warmup/statusboard.py):
its stage, and per engine phase the furthest ``[done, total]`` of the engine's tqdm bars (the
same counts as its `warmgate-progress` lines). The operator reads it through the Pod IP
(`runtime.gather`, docs/operator.md "How progress and drift reach the operator") and writes
a new progress into the status at most once per `MIN_WRITE_INTERVAL_S` per object.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.api.constants import RUNNER_STATUS_PORT_NAME
from warmgate.api.status import WarmupProgress
from warmgate.buckets import BucketPlan
from warmgate.buckets.cost import phase_seconds
from warmgate.contract.board import ENGINE_PHASES, WarmupBoard
from warmgate.contract.schema import MAX_COUNT

# At most one progress write per object per ~10 s (issue 13): a warmup of 16 000 buckets would
# otherwise rewrite the status on every resync of every object.
MIN_WRITE_INTERVAL_S: Final = 10.0
STATUS_PORT_NAME: Final = RUNNER_STATUS_PORT_NAME
# Per engine phase (prompt, decode): the plan's buckets and their estimated compile seconds.
PhaseCost = tuple[tuple[int, float], tuple[int, float]]
# The phase costs of the plans warming lately, by digest (a sync of a running warmup asks
# every 15 s; the sum over a plan's buckets costs milliseconds per thousand).
_PHASES: OrderedDict[str, PhaseCost] = OrderedDict()
_PHASES_KEPT: Final = 64
_PHASES_LOCK = threading.Lock()


def plan_phases(plan: BucketPlan) -> PhaseCost:
    """The plan's buckets and estimated compile seconds per engine phase (cached)."""
    with _PHASES_LOCK:
        found = _PHASES.get(plan.digest)
        if found is not None:
            _PHASES.move_to_end(plan.digest)
            return found
    prompt_s, decode_s = phase_seconds(plan)
    cost = ((len(plan.prompt_buckets), prompt_s), (len(plan.decode_buckets), decode_s))
    with _PHASES_LOCK:
        _PHASES[plan.digest] = cost
        while len(_PHASES) > _PHASES_KEPT:
            _PHASES.popitem(last=False)
    return cost


def compiled_fraction(progress: dict[str, tuple[int, int]], phases: PhaseCost) -> float | None:
    """Estimated compile seconds done over those of the whole plan, from the warmed count of
    each phase; None without an estimate. The engine compiles its prompt buckets first, and
    the cost model weighs each more than a decode bucket (more tokens per graph): by count, a
    warmup on its estimate looks slow while it compiles them.

    e.g. the eagle3 example (upper bound, 8B model): 35 prompt buckets of 72 s in all and 334
    decode buckets of 501 s; all prompt buckets and 10 decode ones are 87 of 573 s, 0.15 (45 of
    369 buckets: 0.12). Each phase's buckets are taken as equal among themselves.
    """
    total = sum(seconds for _, seconds in phases)
    if total <= 0:
        return None
    done = 0.0
    for phase, (count, seconds) in zip(ENGINE_PHASES, phases, strict=True):
        if phase in progress and count > 0:
            done += min(1.0, progress[phase][0] / count) * seconds
    return min(1.0, done / total)


def running_pod(pods: list[Manifest]) -> Manifest | None:
    """The newest Running Pod with an IP: the current warmup attempt."""
    running = [p for p in pods if _running(p.get("status") or {})]
    running.sort(key=lambda p: p.get("metadata", {}).get("creationTimestamp") or "")
    return running[-1] if running else None


def _running(status: dict[str, Any]) -> bool:
    return status.get("phase") == "Running" and bool(status.get("podIP"))


def progress_of(
    board: WarmupBoard,
    *,
    planned: int,
    estimate_s: float,
    key: str,
    at: datetime,
    phases: PhaseCost | None = None,
) -> WarmupProgress | None:
    """status.warmup.progress from the runner's board; None when it is another plan's.

    e.g. prompt [34, 34] and decode [57, 189] of 223 planned after 120 s: 91 warmed, 40 %,
    about 120 * 132 / 91 = 174 s remaining. Before the first bucket, the plan's estimate minus
    the elapsed time is the remaining time.
    """
    if board.key != key:
        return None
    pairs = {p: board.progress[p] for p in ENGINE_PHASES if p in board.progress}
    warmed = sum(done for done, _ in pairs.values())
    elapsed = board.elapsed_s
    phase = next((p for p in reversed(ENGINE_PHASES) if p in pairs), None)
    percent = min(100, warmed * 100 // planned) if planned > 0 else None
    if warmed > 0 and planned > 0:
        remaining = max(0.0, elapsed * (planned - warmed) / warmed)
    else:
        remaining = max(0.0, estimate_s - elapsed)
    return WarmupProgress(
        stage=board.stage,
        phase=phase,
        warmed_buckets=warmed,
        planned_buckets=planned,
        percent=percent,
        compiled_fraction=compiled_fraction(pairs, phases) if phases is not None else None,
        elapsed_seconds=int(elapsed),
        estimated_remaining_seconds=round(min(remaining, MAX_COUNT)),
        update_time=at,
    )


def throttled(
    old: WarmupProgress | None, new: WarmupProgress | None, at: datetime
) -> WarmupProgress | None:
    """The progress to write: the old one while it is younger than the interval.

    A stage change (e.g. warmup -> probe) is written at once: it is rare and users wait for it.
    """
    if new is None or old is None or old.update_time is None:
        return new if new is not None else old
    young = (at - old.update_time).total_seconds() < MIN_WRITE_INTERVAL_S
    return old if young and old.stage == new.stage else new
