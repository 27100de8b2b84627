"""Scenario g: no schedulable Gaudi capacity (a nodeSelector no node matches).

The scheduler leaves the warmup Pod Pending with PodScheduled=False, reason Unschedulable. The
user reads that in the SDD's Warmed condition within one resync, never "warming" (issue 11
item 4). Past spec.warmup.pendingTimeoutSeconds (60 s here) the warmup fails with that reason:
the Job is stopped and the object is Stalled. Fixing the placement then takes effect: a new Job
warms the plan and the object becomes Ready (item 6).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from e2e_support import E2ECluster, condition, is_true, sdd, wait_for

from warmgate.devcluster.operator import RESYNC_SECONDS

NAME = "nowhere"
GENERATION = "habana.ai/gaudi.generation"  # the node is labelled gaudi2


def _unschedulable(e2e: E2ECluster, ns: str) -> dict[str, Any] | None:
    for pod in e2e.items("pods", ns, NAME):
        scheduled = condition(pod, "PodScheduled")
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return pod
    return None


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    selector = {GENERATION: "gaudi9"}
    doc = sdd(NAME, namespace, e2e.images.engine.ref, node_selector=selector, pending_timeout=60)
    e2e.apply(doc)
    pod = wait_for("the scheduler's verdict", lambda: _unschedulable(e2e, namespace), 120)
    time.sleep(2 * RESYNC_SECONDS + 2)  # one full resync after the verdict, with margin
    seen = e2e.get("sdd", "-n", namespace, NAME)

    def stalled() -> dict[str, Any] | None:
        obj = e2e.get("sdd", "-n", namespace, NAME)
        return obj if is_true(obj, "Stalled") else None

    failed = wait_for("the pending deadline", stalled, 150)
    (stopped,) = e2e.items("jobs", namespace, NAME)
    wait_for("the stopped Job's Pod to go", lambda: not _unschedulable(e2e, namespace), 60)
    fixed = {"spec": {"warmup": {"placement": {"nodeSelector": {GENERATION: "gaudi2"}}}}}
    e2e.kubectl("patch", "sdd", NAME, "-n", namespace, "--type=merge", "-p", json.dumps(fixed))
    waited = e2e.wait_ready(namespace, NAME)
    return {"pod": pod, "sdd": seen, "failed": failed, "stopped": stopped, "wait": waited}


def test_the_warmup_pod_is_unschedulable_and_nothing_serves(run: dict[str, Any]) -> None:
    assert (
        "didn't match Pod's node affinity/selector"
        in condition(run["pod"], "PodScheduled")["message"]
    )
    assert condition(run["sdd"], "Ready")["status"] == "False"


def test_the_user_reads_unschedulable_within_one_resync(run: dict[str, Any]) -> None:
    warmed = condition(run["sdd"], "Warmed")
    assert "warming" not in warmed["message"]
    assert "Unschedulable" in warmed["reason"] + warmed["message"]
    assert "node affinity/selector" in warmed["message"]


def test_past_the_deadline_the_warmup_fails_with_that_reason(run: dict[str, Any]) -> None:
    warmed, stalled = condition(run["failed"], "Warmed"), condition(run["failed"], "Stalled")
    assert (warmed["status"], warmed["reason"]) == ("False", "Unschedulable")
    assert "more than spec.warmup.pendingTimeoutSeconds=60" in warmed["message"]
    assert stalled["reason"] == "Unschedulable"
    job = run["stopped"]
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["annotations"]["warmgate.dev/warmup-failed"].startswith("Unschedulable")


def test_fixing_the_placement_warms_with_a_new_job(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert run["wait"].returncode == 0, run["wait"].stderr
    (job,) = e2e.items("jobs", namespace, NAME)
    assert job["metadata"]["name"] != run["stopped"]["metadata"]["name"]
    assert is_true(job, "Complete")
    obj = e2e.get("sdd", "-n", namespace, NAME)
    assert condition(obj, "Warmed")["reason"] == "WarmupSucceeded"
    assert "Stalled" not in {c["type"] for c in obj["status"]["conditions"]}
