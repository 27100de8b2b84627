"""The serving engines' measured spec-decode acceptance, pure: the runners' `spec_decode`
counters summed over Pods, the two figures derived from them, and the write rate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from warmgate.contract.board import ServeBoard, read_board
from warmgate.reconcile.sync.acceptance import MIN_WRITE_INTERVAL_S, evaluate_acceptance, measured

AT = datetime(2026, 12, 2, 10, 0, 0, tzinfo=UTC)


def served(*docs: dict[str, Any]) -> list[ServeBoard]:
    """What the sync takes from the runners' answers: their serve-mode boards."""
    return [b for d in docs if isinstance(b := read_board(d), ServeBoard)]


def _serve(drafts: int, tokens: int, accepted: int, **extra: Any) -> ServeBoard:
    counters = {"drafts": drafts, "draft_tokens": tokens, "accepted_tokens": accepted, **extra}
    (board,) = served({"mode": "serve", "unwarmed": [], "spec_decode": counters})
    return board


def test_the_target_as_its_own_draft_accepts_everything() -> None:
    # k = 2: every draft proposes 2 tokens and both are accepted, so each step yields 1 + 2.
    found = measured([_serve(40, 80, 80, per_position_acceptance_rate=[1.0, 1.0])], AT)
    assert found is not None
    assert (found.acceptance_rate, found.mean_acceptance_length) == (1.0, 3.0)
    assert found.per_position_acceptance_rate == [1.0, 1.0]
    assert (found.drafts, found.draft_tokens, found.accepted_tokens, found.pods) == (40, 80, 80, 1)
    assert found.update_time == AT


def test_a_draft_the_target_never_agrees_with_accepts_nothing() -> None:
    found = measured([_serve(40, 80, 0, per_position_acceptance_rate=[0.0, 0.0])], AT)
    assert found is not None
    assert (found.acceptance_rate, found.mean_acceptance_length) == (0.0, 1.0)


def test_pods_are_summed_not_averaged() -> None:
    # a: 100 drafts, 200 tokens, 150 accepted (0.75); b: 50, 100, 0 -> 150 of 300 = 0.5, not 0.375
    docs = [
        _serve(100, 200, 150, per_position_acceptance_rate=[0.9, 0.6]),
        _serve(50, 100, 0, per_position_acceptance_rate=[0.0, 0.0]),
    ]
    found = measured(docs, AT)
    assert found is not None
    assert (found.acceptance_rate, found.mean_acceptance_length, found.pods) == (0.5, 2.0, 2)
    assert found.per_position_acceptance_rate == [0.6, 0.4]  # 90/150, 60/150


def test_before_the_first_draft_there_is_no_figure_and_without_counters_no_record() -> None:
    found = measured([_serve(0, 0, 0)], AT)
    assert found is not None
    assert (found.acceptance_rate, found.mean_acceptance_length, found.pods) == (None, None, 1)
    no_counters = {"mode": "serve", "unwarmed": [], "spec_decode": None}
    warmup = {"mode": "warmup", "spec_decode": {"drafts": 1}}
    assert measured(served(no_counters, warmup, {"mode": "serve"}), AT) is None
    odd = {"drafts": "many", "draft_tokens": True, "accepted_tokens": -3}
    (board,) = served({"mode": "serve", "spec_decode": odd})
    found = measured([board], AT)
    assert found is not None
    assert (found.drafts, found.draft_tokens, found.accepted_tokens) == (0, 0, 0)


def test_a_new_reading_waits_for_the_interval_and_another_plan_drops_the_record() -> None:
    old = measured([_serve(10, 20, 10)], AT)
    later = AT + timedelta(seconds=MIN_WRITE_INTERVAL_S - 1)
    docs = [_serve(20, 40, 30)]
    assert evaluate_acceptance(old, docs, same_plan=True, at=later) is old
    due = AT + timedelta(seconds=MIN_WRITE_INTERVAL_S)
    new = evaluate_acceptance(old, docs, same_plan=True, at=due)
    assert new is not None
    assert new.acceptance_rate == 0.75
    assert evaluate_acceptance(old, [], same_plan=True, at=due) is old  # no answer: kept
    assert evaluate_acceptance(old, [], same_plan=False, at=due) is None
    fresh = evaluate_acceptance(old, docs, same_plan=False, at=later)
    assert fresh is not None
    assert fresh.update_time == later  # another plan's record does not hold the new one back
