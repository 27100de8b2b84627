"""Condition helpers with metav1.Condition semantics (after cert-manager's conditions.go)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from warmgate.api.constants import (
    BUCKETS_PLANNED,
    COVERAGE_PROVEN,
    READY,
    RECONCILING,
    STALLED,
    WARMED,
    Phase,
    Reason,
)
from warmgate.api.status import Condition, ConditionStatus, PhaseName


def now() -> datetime:
    """The current UTC time at metav1.Time precision (whole seconds)."""
    return datetime.now(UTC).replace(microsecond=0)


def get_condition(conditions: Sequence[Condition] | None, type_: str) -> Condition | None:
    """The condition of that type, or None."""
    return next((c for c in conditions or () if c.type == type_), None)


def is_true(conditions: Sequence[Condition] | None, type_: str) -> bool:
    """True when the condition exists with status True."""
    condition = get_condition(conditions, type_)
    return condition is not None and condition.status == "True"


def set_condition(
    conditions: Sequence[Condition] | None,
    type_: str,
    status: ConditionStatus,
    reason: str,
    message: str = "",
    *,
    generation: int | None = None,
    at: datetime | None = None,
) -> list[Condition]:
    """Return the list with that condition set; lastTransitionTime moves only when status changes.

    A same-status update keeps the old timestamp but takes the new reason, message and
    observedGeneration, so "Ready since 3h" stays true while details change.
    """
    old = get_condition(conditions, type_)
    moved = old is None or old.status != status
    new = Condition(
        type=type_,
        status=status,
        reason=reason,
        message=message,
        observed_generation=generation,
        last_transition_time=(at or now()) if old is None or moved else old.last_transition_time,
    )
    kept = [c for c in conditions or () if c.type != type_]
    return _ordered([*kept, new])


def remove_condition(conditions: Sequence[Condition] | None, type_: str) -> list[Condition]:
    """Return the list without that condition (kstatus: Reconciling/Stalled absent when idle)."""
    return [c for c in conditions or () if c.type != type_]


def _rank(condition: Condition) -> int:
    order = (BUCKETS_PLANNED, COVERAGE_PROVEN, WARMED, READY, RECONCILING, STALLED)
    return order.index(condition.type) if condition.type in order else len(order)


def _ordered(conditions: list[Condition]) -> list[Condition]:
    """Stable lifecycle order, so a status write is a no-op when nothing changed."""
    return sorted(conditions, key=_rank)


def same_conditions(a: Sequence[Condition] | None, b: Sequence[Condition] | None) -> bool:
    """True when both lists carry the same types, statuses, reasons, messages and generations."""
    return [c.model_dump() for c in a or ()] == [c.model_dump() for c in b or ()]


def derive_phase(conditions: Sequence[Condition] | None) -> PhaseName:
    """The one-word status.phase summary, derived from the conditions only.

    Warming means a warmup runs now (Warmed=False, reason WarmupRunning), not merely that the
    plan is ready for one: a plan waiting for its warmup is Pending, and the Ready message says
    what it waits for. Planning covers a plan still being computed (BucketsPlanned not True).
    """
    if is_true(conditions, STALLED):
        return Phase.FAILED
    if is_true(conditions, READY):
        return Phase.READY
    if is_true(conditions, WARMED):
        return Phase.STARTING
    warmed = get_condition(conditions, WARMED)
    if warmed is not None and warmed.reason == Reason.WARMUP_RUNNING:
        return Phase.WARMING
    if conditions and not is_true(conditions, BUCKETS_PLANNED):
        return Phase.PLANNING
    return Phase.PENDING


def is_current(conditions: Sequence[Condition] | None, generation: int | None) -> bool:
    """kstatus "Current": Ready is True and was computed from this generation."""
    ready = get_condition(conditions, READY)
    return ready is not None and ready.status == "True" and ready.observed_generation == generation
