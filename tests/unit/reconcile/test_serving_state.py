"""Ready follows the serving Deployment; an older verified plan serves while a new one warms."""

from __future__ import annotations

from typing import Any

from warmgate.reconcile.serving_state import evaluate_serving

NEW, OLD = "a" * 64, "b" * 64
NAMES = ("x-serving", "x-serving")


def deployment(plan: str, wanted: int, ready: int, generation: int = 2, seen: int = 2) -> Any:
    return {
        "metadata": {"annotations": {"warmgate.dev/plan-hash": plan}, "generation": generation},
        "spec": {"replicas": wanted},
        "status": {"observedGeneration": seen, "replicas": ready, "readyReplicas": ready},
    }


def ready_of(dep: Any) -> tuple[str, str]:
    v = evaluate_serving(dep, NEW, names=NAMES, selector="s").verdict
    return (v.status, v.reason)


def test_no_deployment_waits_for_warmup() -> None:
    assert ready_of(None) == ("False", "WarmupPending")


def test_ready_needs_every_replica_and_an_observed_generation() -> None:
    assert ready_of(deployment(NEW, 2, 2)) == ("True", "ReplicasReady")
    assert ready_of(deployment(NEW, 2, 1)) == ("False", "ServingProgressing")
    assert ready_of(deployment(NEW, 2, 2, generation=3, seen=2)) == ("False", "ServingProgressing")


def test_the_last_verified_plan_keeps_ready_while_a_new_one_warms() -> None:
    state = evaluate_serving(deployment(OLD, 2, 2), NEW, names=NAMES, selector="s")
    assert (state.verdict.status, state.verdict.reason) == ("True", "ReplicasReady")
    assert "last verified plan" in state.verdict.message
    assert state.summary.plan_hash == OLD
    assert ready_of(deployment(OLD, 2, 0)) == ("False", "ServingProgressing")


def test_zero_replicas_is_ready_by_design() -> None:
    assert ready_of(deployment(NEW, 0, 0)) == ("True", "ScaledToZero")
