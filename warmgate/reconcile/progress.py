"""Warmup progress, pure: the runner's status document -> status.warmup.progress, rate-limited.

The runner of the warmup Pod serves ``GET /warmgate/status`` (warmgate/warmup/statusboard.py):
its stage, and per engine phase the furthest ``[done, total]`` of the engine's tqdm bars (the
same counts as its `warmgate-progress` lines). The operator reads it through the Pod IP
(`handlers.gather`, docs/operator.md "How progress and drift reach the operator") and writes
a new progress into the status at most once per `MIN_WRITE_INTERVAL_S` per object.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.api.constants import RUNNER_STATUS_PORT_NAME
from warmgate.api.status import WarmupProgress
from warmgate.warmup.wire.board import ENGINE_PHASES, WarmupBoard
from warmgate.warmup.wire.schema import MAX_COUNT

# At most one progress write per object per ~10 s (issue 13): a warmup of 16 000 buckets would
# otherwise rewrite the status on every resync of every object.
MIN_WRITE_INTERVAL_S: Final = 10.0
STATUS_PORT_NAME: Final = RUNNER_STATUS_PORT_NAME


def running_pod(pods: list[Manifest]) -> Manifest | None:
    """The newest Running Pod with an IP: the current warmup attempt."""
    running = [p for p in pods if _running(p.get("status") or {})]
    running.sort(key=lambda p: p.get("metadata", {}).get("creationTimestamp") or "")
    return running[-1] if running else None


def _running(status: dict[str, Any]) -> bool:
    return status.get("phase") == "Running" and bool(status.get("podIP"))


def progress_of(
    board: WarmupBoard, *, planned: int, estimate_s: float, key: str, at: datetime
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
