"""Ready follows the serving Deployment's rollout, as the Deployment controller counts it.

Issue 11 item 1: a rollout is complete only when the controller observed the current spec and
updatedReplicas == replicas == the wanted replicas, all available; status.serving.planHash names
a plan only then; a Deployment past its progress deadline stalls.
"""

from __future__ import annotations

from typing import Any

from warmgate.reconcile.sync.serving_state import Serving, ServingState, evaluate_serving

NEW, OLD = "a" * 64, "b" * 64
NAMES = ("x-serving", "x-serving")


def deployment(
    plan: str,
    wanted: int,
    ready: int,
    *,
    generation: int = 2,
    seen: int = 2,
    updated: int | None = None,
    replicas: int | None = None,
    stuck: bool = False,
) -> Any:
    status: dict[str, Any] = {
        "observedGeneration": seen,
        "replicas": ready if replicas is None else replicas,
        "updatedReplicas": ready if updated is None else updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
    }
    if stuck:
        status["conditions"] = [
            {
                "type": "Progressing",
                "status": "False",
                "reason": "ProgressDeadlineExceeded",
                "message": 'ReplicaSet "x-serving-7d9" has timed out progressing.',
            }
        ]
    return {
        "metadata": {"annotations": {"warmgate.dev/plan-hash": plan}, "generation": generation},
        "spec": {"replicas": wanted},
        "status": status,
    }


def state(dep: Any, replicas: int = 2, before: str | None = None, was_ready: bool = False) -> Any:
    asked = Serving(NEW, replicas, NAMES, "s", served_before=before, was_ready=was_ready)
    return evaluate_serving(dep, asked)


def ready_of(dep: Any, replicas: int = 2, was_ready: bool = False) -> tuple[str, str]:
    v = state(dep, replicas, was_ready=was_ready).verdict
    return (v.status, v.reason)


def test_no_deployment_waits_for_warmup() -> None:
    assert ready_of(None) == ("False", "WarmupPending")


def test_ready_needs_every_replica_and_an_observed_generation() -> None:
    assert ready_of(deployment(NEW, 2, 2)) == ("True", "ReplicasReady")
    assert ready_of(deployment(NEW, 2, 1)) == ("False", "ServingProgressing")
    assert ready_of(deployment(NEW, 2, 2, generation=3, seen=2)) == ("False", "ServingProgressing")


def test_a_rollout_is_complete_only_when_every_replica_runs_the_new_template() -> None:
    """Two ready replicas, one of them still the old template (updated 1, replicas 3 during
    the surge): not complete, and status.serving keeps naming the plan every replica ran."""
    rolling = deployment(NEW, 2, 2, updated=1, replicas=3)
    got: ServingState = state(rolling, before=OLD, was_ready=True)
    assert (got.verdict.status, got.verdict.reason) == ("True", "RollingOut")
    assert not got.realised
    assert got.summary.plan_hash == OLD
    done = state(deployment(NEW, 2, 2), before=OLD, was_ready=True)
    assert done.realised
    assert done.summary.plan_hash == NEW


def test_the_first_rollout_is_not_ready_until_complete() -> None:
    got = state(deployment(NEW, 2, 1, updated=2), was_ready=False)
    assert (got.verdict.status, got.verdict.reason) == ("False", "ServingProgressing")
    assert got.summary.plan_hash is None


def test_the_last_verified_plan_keeps_ready_while_a_new_one_warms() -> None:
    got = state(deployment(OLD, 2, 2), before=OLD, was_ready=True)
    assert (got.verdict.status, got.verdict.reason) == ("True", "ReplicasReady")
    assert "last verified plan" in got.verdict.message
    assert got.summary.plan_hash == OLD
    assert not got.realised  # the current generation's plan is not served yet
    assert ready_of(deployment(OLD, 2, 0)) == ("False", "ServingProgressing")


def test_a_progress_deadline_stalls_and_ready_says_so() -> None:
    stuck = deployment(NEW, 2, 0, updated=1, replicas=1, stuck=True)
    got = state(stuck)
    assert (got.verdict.status, got.verdict.reason) == ("False", "ProgressDeadlineExceeded")
    assert got.stalled
    assert "timed out progressing" in got.verdict.message
    # Old Pods still serve: Ready stays True, the stall is reported all the same.
    serving = state(deployment(NEW, 2, 2, updated=1, replicas=3, stuck=True), was_ready=True)
    assert (serving.verdict.status, serving.stalled) == ("True", True)


def test_zero_replicas_is_ready_by_design() -> None:
    assert ready_of(deployment(NEW, 0, 0), replicas=0) == ("True", "ScaledToZero")
