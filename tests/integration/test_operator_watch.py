"""Issue 14 item 1: a watched child's change reaches the status at once, not at the resync.

The operator runs with a one-hour safety resync, so anything that reaches the status within
these tests' waits came through the watch of the children (`kube/children.py`) and the
object's follower (`runtime/follower.py`). No kubelet or Job controller runs here; the test
plays them, as test_operator_warmup.py does.
"""

from __future__ import annotations

import time

import pytest
from support.api_controllers import finish, get, runner_summary, started
from support.kube_objects import condition_map
from support.polling import eventually

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

HOUR = "3600"


@pytest.fixture(scope="module")
def operator_env() -> dict[str, str]:
    """An hourly resync: what reaches the status in time came by the watches."""
    return {"WARMGATE_RESYNC_SECONDS": HOUR, "WARMGATE_OPERATOR_IMAGE": "warmgate:test"}


def test_a_jobs_completion_reaches_the_status_without_a_resync(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    warmup = started(control_plane, ns, "watched")["status"]["warmup"]
    finish(
        control_plane,
        ns,
        warmup["jobName"],
        runner_summary("verified", warmup["cacheKey"]),
        ok=True,
    )
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/watched", "--for=condition=Warmed", "--timeout=30s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "watched")
    assert condition_map(obj)["Warmed"] == ("True", "WarmupSucceeded")
    # Verified: the follower went on to create the serving Deployment in the same sync.
    deployment = get(control_plane, "-n", ns, "deployment", "watched-serving")
    assert deployment["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]


def test_a_deleted_job_is_created_again_without_a_resync(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    job = started(control_plane, ns, "recreated")["status"]["warmup"]["jobName"]
    uid = get(control_plane, "-n", ns, "job", job)["metadata"]["uid"]
    control_plane.kubectl("delete", "job", job, "-n", ns, "--cascade=background", "--wait=false")
    assert eventually(lambda: _uid(control_plane, ns, job) not in (None, uid), seconds=30)


def _uid(cp: ControlPlane, ns: str, job: str) -> str | None:
    found = get(cp, "-n", ns, "jobs")
    uids = [j["metadata"]["uid"] for j in found["items"] if j["metadata"]["name"] == job]
    return uids[0] if uids else None


def test_the_operators_own_writes_do_not_wake_it(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    """After its Job exists, an object left alone is synced no more (until the resync)."""
    ns = module_namespace
    started(control_plane, ns, "quiet")
    time.sleep(2)  # the sync that created the Job has written the status by now
    before = _requests(operator.get("/metrics"))
    time.sleep(3)
    metrics = operator.get("/metrics")
    assert _requests(metrics) == before
    # The Job's ADDED event woke the follower, which found it was the operator's own write.
    assert 'warmgate_follower_syncs_total{trigger="echo"}' in metrics


def _requests(metrics: str) -> float:
    name = "warmgate_api_requests_total "
    line = next(line for line in metrics.splitlines() if line.startswith(name))
    return float(line.split()[1])
