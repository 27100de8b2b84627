"""Scenario b: the engine logs a shape it did not warm; the plan is refused and nothing serves.

The stand-in engine's `unwarmed_on_probe` fault makes it log "Configuration: ... was not
warmed-up!" during the runner's probe; the runner exits 3 (unwarmed_shapes), which the Job's
podFailurePolicy turns into a failed Job at once (no retry can change it).
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_support import E2ECluster, condition, is_true, sdd, wait_for

NAME = "unwarmed"


@pytest.fixture(scope="module")
def outcome(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, faults="unwarmed_on_probe"))

    def stalled() -> dict[str, Any] | None:
        obj = e2e.get("sdd", "-n", namespace, NAME)
        return obj if is_true(obj, "Stalled") else None

    return dict(wait_for("Stalled=True", stalled, 240))


def test_warmed_false_with_the_runners_reason(outcome: dict[str, Any]) -> None:
    warmed = condition(outcome, "Warmed")
    assert (warmed["status"], warmed["reason"]) == ("False", "WarmupFailed")
    assert "unwarmed_shapes" in warmed["message"]
    assert "('decode', 24, 1, 768)" in warmed["message"]


def test_the_failure_policy_failed_the_job_without_a_retry(
    e2e: E2ECluster, namespace: str, outcome: dict[str, Any]
) -> None:
    (job,) = e2e.items("jobs", namespace, NAME)
    assert is_true(job, "Failed")
    assert condition(job, "Failed")["reason"] == "PodFailurePolicy"
    assert job["status"].get("failed") == 1  # exit 3 is permanent: retries stay unused


def test_no_serving_pod_ever_exists(
    e2e: E2ECluster, namespace: str, outcome: dict[str, Any]
) -> None:
    assert e2e.items("deployments", namespace, NAME) == []
    ready = condition(outcome, "Ready")
    assert ready["status"] == "False"
