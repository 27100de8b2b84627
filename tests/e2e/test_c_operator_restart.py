"""Scenario c: the operator Pod is deleted while a warmup runs; its Deployment brings it back,
it creates no second Job, and the SDD reaches the same Ready outcome."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_support import E2ECluster, is_true, sdd, wait_for

from warmgate.devcluster.operator import NAMESPACE

# It deletes the operator's Pod: every other object's sync pauses (tests/support/node_share.py).
pytestmark = pytest.mark.node_alone

NAME = "restart"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    before = e2e.get("pods", "-n", NAMESPACE)["items"]
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref))
    job = wait_for("the warmup Job", lambda: e2e.items("jobs", namespace, NAME), 120)[0]
    e2e.kubectl("delete", "pods", "-n", NAMESPACE, "--all", "--wait=false")
    job_then = e2e.get("job", "-n", namespace, job["metadata"]["name"])
    waited = e2e.wait_ready(namespace, NAME)
    return {"before": before, "job_then": job_then, "wait": waited}


def test_the_job_was_still_running_when_the_operator_went(run: dict[str, Any]) -> None:
    assert not is_true(run["job_then"], "Complete")


def test_a_new_operator_pod_runs(e2e: E2ECluster, run: dict[str, Any]) -> None:
    pods = e2e.get("pods", "-n", NAMESPACE)["items"]
    old = {p["metadata"]["uid"] for p in run["before"]}
    assert [
        p for p in pods if p["metadata"]["uid"] not in old and p["status"]["phase"] == "Running"
    ]


def test_same_outcome_and_no_second_job(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert run["wait"].returncode == 0, run["wait"].stderr
    jobs = e2e.items("jobs", namespace, NAME)
    assert [j["metadata"]["uid"] for j in jobs] == [run["job_then"]["metadata"]["uid"]]
    assert is_true(e2e.get("sdd", "-n", namespace, NAME), "Warmed")
