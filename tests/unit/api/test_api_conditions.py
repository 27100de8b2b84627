"""Condition helpers: metav1.Condition semantics and the phase summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from warmgate.api import (
    Phase,
    Reason,
    derive_phase,
    get_condition,
    is_current,
    is_true,
    remove_condition,
    same_conditions,
    set_condition,
)
from warmgate.api.constants import (
    BUCKETS_PLANNED,
    COVERAGE_PROVEN,
    READY,
    RECONCILING,
    STALLED,
    WARMED,
)

T0 = datetime(2026, 11, 29, 10, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=5)


def test_new_condition_gets_the_given_time_and_generation() -> None:
    conds = set_condition([], READY, "False", Reason.WARMUP_PENDING, "waiting", generation=2, at=T0)
    ready = get_condition(conds, READY)
    assert ready is not None
    assert (ready.status, ready.reason, ready.message) == ("False", "WarmupPending", "waiting")
    assert (ready.last_transition_time, ready.observed_generation) == (T0, 2)


def test_transition_time_moves_only_when_status_changes() -> None:
    conds = set_condition([], WARMED, "False", Reason.WARMUP_RUNNING, "3/10", at=T0)
    conds = set_condition(conds, WARMED, "False", Reason.WARMUP_RUNNING, "7/10", at=T1)
    warmed = get_condition(conds, WARMED)
    assert warmed is not None
    assert (warmed.last_transition_time, warmed.message) == (T0, "7/10")
    conds = set_condition(conds, WARMED, "True", Reason.WARMUP_SUCCEEDED, at=T1)
    warmed = get_condition(conds, WARMED)
    assert warmed is not None
    assert warmed.last_transition_time == T1


def test_conditions_keep_lifecycle_order_and_one_entry_per_type() -> None:
    conds = set_condition([], READY, "False", Reason.PENDING, at=T0)
    conds = set_condition(conds, BUCKETS_PLANNED, "True", Reason.PLANNED, at=T0)
    conds = set_condition(conds, READY, "Unknown", Reason.PENDING, at=T0)
    assert [c.type for c in conds] == [BUCKETS_PLANNED, READY]


def test_set_condition_does_not_mutate_its_input() -> None:
    original = set_condition([], READY, "False", Reason.PENDING, at=T0)
    set_condition(original, READY, "True", Reason.REPLICAS_READY, at=T1)
    assert original[0].status == "False"


def test_remove_and_same_conditions() -> None:
    conds = set_condition([], RECONCILING, "True", Reason.WARMUP_RUNNING, at=T0)
    conds = set_condition(conds, READY, "False", Reason.WARMUP_RUNNING, at=T0)
    assert [c.type for c in remove_condition(conds, RECONCILING)] == [READY]
    again = set_condition(conds, READY, "False", Reason.WARMUP_RUNNING, at=T1)
    assert same_conditions(conds, again)
    assert not same_conditions(conds, remove_condition(conds, READY))


def test_derive_phase_follows_the_lifecycle() -> None:
    assert derive_phase(None) == Phase.PENDING
    conds = set_condition([], BUCKETS_PLANNED, "Unknown", Reason.PENDING, at=T0)
    assert derive_phase(conds) == Phase.PLANNING
    conds = set_condition(conds, BUCKETS_PLANNED, "True", Reason.PLANNED, at=T0)
    conds = set_condition(conds, COVERAGE_PROVEN, "True", Reason.COVERAGE_COMPLETE, at=T0)
    conds = set_condition(conds, WARMED, "Unknown", Reason.WARMUP_PENDING, at=T0)
    assert derive_phase(conds) == Phase.PENDING  # planned and proven, no warmup running yet
    conds = set_condition(conds, WARMED, "False", Reason.WARMUP_RUNNING, at=T0)
    assert derive_phase(conds) == Phase.WARMING
    conds = set_condition(conds, WARMED, "True", Reason.WARMUP_SUCCEEDED, at=T0)
    assert derive_phase(conds) == Phase.STARTING
    conds = set_condition(conds, READY, "True", Reason.REPLICAS_READY, at=T0)
    assert derive_phase(conds) == Phase.READY
    conds = set_condition(conds, STALLED, "True", Reason.WARMUP_FAILED, at=T0)
    assert derive_phase(conds) == Phase.FAILED


def test_is_true_and_is_current() -> None:
    conds = set_condition([], READY, "True", Reason.REPLICAS_READY, generation=4, at=T0)
    assert is_true(conds, READY)
    assert not is_true(conds, WARMED)
    assert is_current(conds, 4)
    assert not is_current(conds, 5)  # spec changed since Ready was computed


def test_condition_serialises_as_metav1_time() -> None:
    conds = set_condition([], READY, "True", Reason.REPLICAS_READY, at=T0)
    dumped = conds[0].to_dict()
    assert dumped["lastTransitionTime"] == "2026-11-29T10:00:00Z"
    assert set(dumped) == {"type", "status", "reason", "message", "lastTransitionTime"}
