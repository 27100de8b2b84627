"""Scenario d: the warmup Pod is deleted while the runner runs.

The runner gets SIGTERM and exits 7 (timed_out). A deletion is not a disruption the Job's
podFailurePolicy ignores (only DisruptionTarget is, e.g. an eviction), and 7 is not one of the
permanent codes, so the Job counts one failed attempt against `warmup.retries` and starts
another Pod. The user sees Warmed=False "warming the plan (attempt 2)", then the same Ready
outcome, with `status.warmup.attempts: 2`.
"""

from __future__ import annotations

from typing import Any

import pytest
from e2e_support import E2ECluster, is_true, running_runner, sdd, wait_for

NAME = "podgone"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    # A slow stand-in warmup (a test double fault): the deletion lands while the runner runs.
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, faults="slow_warmup=15"))
    pod = wait_for("the runner to run", lambda: running_runner(e2e, namespace, NAME), 120)
    e2e.kubectl("delete", "pod", "-n", namespace, pod["metadata"]["name"], "--wait=false")
    waited = e2e.wait_ready(namespace, NAME)
    return {"deleted": pod, "wait": waited}


def test_the_job_counted_one_failed_attempt_and_retried(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    (job,) = e2e.items("jobs", namespace, NAME)
    assert is_true(job, "Complete")
    assert (job["status"].get("failed"), job["status"].get("succeeded")) == (1, 1)


def test_the_user_sees_the_same_ready_outcome_after_two_attempts(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert run["wait"].returncode == 0, run["wait"].stderr
    obj = e2e.get("sdd", "-n", namespace, NAME)
    assert obj["status"]["warmup"]["attempts"] == 2
    assert is_true(obj, "Warmed")
