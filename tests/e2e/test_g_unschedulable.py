"""Scenario g: no schedulable Gaudi capacity (a nodeSelector no node matches).

The scheduler leaves the warmup Pod Pending with PodScheduled=False, reason Unschedulable. The
user should read that in the SDD's Warmed condition within one resync, never "warming".
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from e2e_support import E2ECluster, condition, sdd, wait_for

from warmgate.devcluster.operator import RESYNC_SECONDS

NAME = "nowhere"


def _unschedulable(e2e: E2ECluster, ns: str) -> dict[str, Any] | None:
    for pod in e2e.items("pods", ns, NAME):
        scheduled = condition(pod, "PodScheduled")
        if scheduled.get("status") == "False" and scheduled.get("reason") == "Unschedulable":
            return pod
    return None


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    selector = {"habana.ai/gaudi.generation": "gaudi9"}
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, node_selector=selector))
    pod = wait_for("the scheduler's verdict", lambda: _unschedulable(e2e, namespace), 120)
    time.sleep(2 * RESYNC_SECONDS + 2)  # one full resync after the verdict, with margin
    return {"pod": pod, "sdd": e2e.get("sdd", "-n", namespace, NAME)}


def test_the_warmup_pod_is_unschedulable_and_nothing_serves(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert (
        "didn't match Pod's node affinity/selector"
        in condition(run["pod"], "PodScheduled")["message"]
    )
    assert e2e.items("deployments", namespace, NAME) == []
    assert condition(run["sdd"], "Ready")["status"] == "False"


@pytest.mark.xfail(
    strict=True,
    reason="issue 11 item 4: a warmup Pod the scheduler cannot place is reported as "
    "'Job ... is warming the plan' instead of Unschedulable with the scheduler's message",
)
def test_the_user_reads_unschedulable_within_one_resync(run: dict[str, Any]) -> None:
    warmed = condition(run["sdd"], "Warmed")
    assert "warming" not in warmed["message"]
    assert "Unschedulable" in warmed["reason"] + warmed["message"]
    assert "node affinity/selector" in warmed["message"]
