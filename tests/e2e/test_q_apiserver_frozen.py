"""Scenario q (issue 23 item 8): the apiserver is frozen (SIGSTOP) for 30 s while the operator
syncs objects just applied, then resumed (SIGCONT).

Every request the operator has in flight then waits on a connection nobody answers: each one
ends with an answer once the apiserver resumes, or with the read timeout (30 s by default) as a
transient error that the object retries after its backoff (2 s, doubled per failure). What the
user sees: every object converges (its Job, then Ready) soon after the resume, the operator Pod
is not restarted (its liveness probe fails only when no sync finished for 300 s), its liveness
endpoint answers 200 afterwards, and nothing that served before the freeze stopped serving.
"""

from __future__ import annotations

import os
import signal
import time
import urllib.error
import urllib.request
from typing import Any

import pytest
from e2e_support import E2ECluster, is_true, sdd, wait_for
from support.node_share import NodeHold

from warmgate.devcluster.operator import NAMESPACE

# It freezes the API server, needing the node alone from the objects' first syncs until each
# has its Job; the rest overlaps the guest's scenarios (tests/support/node_share.py).
pytestmark = pytest.mark.node_owner

FREEZE_S = 30
SERVING = "before-freeze"
NAMES = ("frozen-0", "frozen-1", "frozen-2")
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _operator_pods(e2e: E2ECluster) -> list[dict[str, Any]]:
    pods = e2e.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=operator")
    return [
        p
        for p in pods["items"]
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def _restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses", []))


def _get(url: str) -> tuple[int, str]:
    try:
        with _OPENER.open(url, timeout=5) as found:
            return int(found.status), found.read().decode()
    except urllib.error.HTTPError as failed:
        with failed:
            return int(failed.code), failed.read().decode()


def _job_of(e2e: E2ECluster, ns: str, name: str) -> bool:
    obj = e2e.get_or_none("sdd", "-n", ns, name)
    return bool((((obj or {}).get("status") or {}).get("warmup") or {}).get("jobName"))


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, node_lock: NodeHold) -> dict[str, Any]:
    image = e2e.images.engine.ref
    e2e.apply(sdd(SERVING, namespace, image))
    assert e2e.wait_ready(namespace, SERVING).returncode == 0
    (pod,) = _operator_pods(e2e)
    with node_lock.alone():  # from the objects' first syncs until each has its Job
        for name in NAMES:
            e2e.apply(sdd(name, namespace, image))
        time.sleep(1.0)  # their first syncs are in flight: planning notice, children
        assert e2e.cluster.cp is not None
        apiserver = e2e.cluster.cp.process("kube-apiserver")
        os.kill(apiserver.pid, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)
        finally:
            os.kill(apiserver.pid, signal.SIGCONT)
        resumed = time.monotonic()
        to_job = {}
        for name in NAMES:
            wait_for(f"{name}'s warmup Job", lambda name=name: _job_of(e2e, namespace, name), 120)
            to_job[name] = time.monotonic() - resumed
    ready = {name: e2e.wait_ready(namespace, name, timeout_s=300) for name in NAMES}
    to_ready = time.monotonic() - resumed
    ip = e2e.get("pod", "-n", NAMESPACE, pod["metadata"]["name"])["status"]["podIP"]
    print(f"after the resume: Jobs in {to_job}, all Ready after {to_ready:.1f} s")
    return {
        "pod": pod,
        "to_job": to_job,
        "ready": ready,
        "health": _get(f"http://{ip}:8081/healthz"),
        "metrics": _get(f"http://{ip}:8080/metrics")[1],
    }


def test_every_object_converges_soon_after_the_resume(run: dict[str, Any]) -> None:
    for name, done in run["ready"].items():
        assert done.returncode == 0, (name, done.stderr)
    # A request frozen with the apiserver ends by its 30 s read timeout at the latest; the
    # object is then retried after its backoff (2 s): one read timeout and a few backoffs.
    assert max(run["to_job"].values()) < 60, run["to_job"]


def test_the_operator_was_not_restarted_and_no_sync_is_stuck(
    e2e: E2ECluster, run: dict[str, Any]
) -> None:
    (pod,) = _operator_pods(e2e)
    assert pod["metadata"]["uid"] == run["pod"]["metadata"]["uid"]
    assert _restarts(pod) == _restarts(run["pod"])
    status, body = run["health"]
    assert status == 200, body
    syncs = [ln for ln in run["metrics"].splitlines() if ln.startswith("warmgate_follower_syncs")]
    print("\n".join(syncs))


def test_what_served_before_the_freeze_still_serves(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    obj = e2e.get("sdd", "-n", namespace, SERVING)
    assert is_true(obj, "Ready")
    assert is_true(obj, "Warmed")
