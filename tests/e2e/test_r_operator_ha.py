"""Scenario r (issue 23 item 9): two operator replicas installed by Helm
(`highAvailability.enabled=true`: leader election on a Lease); the leader's Pod is deleted.

The other replica takes the Lease at once (the leader releases it when it stops) and within the
lease duration in any case, acts on a new object, and nothing is done twice: no second Job, no
second creation of any child, no rollout of a serving Deployment that did not change. The
module restores the standalone install for the scenarios after it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import E2ECluster, is_true, sdd, wait_for

from warmgate.devcluster import operator
from warmgate.devcluster.operator import NAMESPACE, RELEASE

# It reinstalls the operator with two replicas (tests/support/node_share.py).
pytestmark = pytest.mark.node_alone

LEASE = RELEASE  # the chart's full name: the release's, which contains the chart's name
LEASE_DURATION_S = 10


def _holder(e2e: E2ECluster) -> str:
    lease = e2e.get_or_none("lease", "-n", NAMESPACE, LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


def _pods(e2e: E2ECluster) -> list[dict[str, Any]]:
    pods = e2e.get("pods", "-n", NAMESPACE, "-l", "app.kubernetes.io/component=operator")
    return [
        p
        for p in pods["items"]
        if p["status"].get("phase") == "Running" and not p["metadata"].get("deletionTimestamp")
    ]


def _created(e2e: E2ECluster, ns: str, name: str) -> list[str]:
    """Every child the `Created` Events of the object name, as often as they name it."""
    events = e2e.get("events", "-n", ns, f"--field-selector=involvedObject.name={name}")
    found: list[str] = []
    for event in events["items"]:
        if event.get("reason") == "Created":
            children = event["message"].removeprefix("Created ").split(", ")
            found += children * (event.get("count") or 1)
    return found


@pytest.fixture(scope="module")
def ha(e2e: E2ECluster) -> Iterator[None]:
    cluster = e2e.cluster
    operator.upgrade(cluster.assets, cluster.kubeconfig, "highAvailability.enabled=true")
    try:
        wait_for("two operator Pods", lambda: len(_pods(e2e)) == 2, 180)
        wait_for("a leader", lambda: _holder(e2e), 60)
        yield
    finally:
        operator.upgrade(cluster.assets, cluster.kubeconfig, "highAvailability.enabled=false")


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, ha: None) -> dict[str, Any]:
    image = e2e.images.engine.ref
    e2e.apply(sdd("ha-before", namespace, image))
    assert e2e.wait_ready(namespace, "ha-before").returncode == 0
    leader = _holder(e2e).rsplit("_", 1)[0]  # holder identity: the Pod's hostname + a suffix
    names = {p["metadata"]["name"] for p in _pods(e2e)}
    assert leader in names, (leader, names)
    (standby,) = names - {leader}
    deployment = e2e.get("deployment", "-n", namespace, "ha-before-serving")
    created = _created(e2e, namespace, "ha-before")
    jobs = [j["metadata"]["uid"] for j in e2e.items("jobs", namespace, "ha-before")]

    deleted = time.monotonic()
    e2e.kubectl("delete", "pod", "-n", NAMESPACE, leader, "--wait=false")
    e2e.apply(sdd("ha-after", namespace, image))
    wait_for("the standby holding the Lease", lambda: _holder(e2e).startswith(standby), 60)
    took_lease = time.monotonic() - deleted
    wait_for("ha-after's Job", lambda: e2e.items("jobs", namespace, "ha-after"), 120)
    acted = time.monotonic() - deleted
    after = e2e.wait_ready(namespace, "ha-after")
    time.sleep(10)  # two resyncs of the new leader over the old object
    print(f"the standby took the Lease after {took_lease:.1f} s and acted after {acted:.1f} s")
    return {
        "leader": leader,
        "standby": standby,
        "took_lease": took_lease,
        "after": after,
        "deployment": deployment,
        "created": created,
        "jobs": jobs,
    }


def test_the_standby_takes_over_within_the_lease_duration(run: dict[str, Any]) -> None:
    assert run["took_lease"] < LEASE_DURATION_S
    assert run["after"].returncode == 0, run["after"].stderr


def test_nothing_is_done_twice(e2e: E2ECluster, namespace: str, run: dict[str, Any]) -> None:
    jobs = [j["metadata"]["uid"] for j in e2e.items("jobs", namespace, "ha-before")]
    assert jobs == run["jobs"]  # no second Job
    assert _created(e2e, namespace, "ha-before") == run["created"]  # nothing re-created
    deployment = e2e.get("deployment", "-n", namespace, "ha-before-serving")
    before = run["deployment"]["metadata"]
    assert deployment["metadata"]["generation"] == before["generation"]  # no second rollout
    assert len(e2e.items("jobs", namespace, "ha-after")) == 1
    children = _created(e2e, namespace, "ha-after")
    assert children
    assert len(children) == len(set(children)), children  # each child created once
    assert is_true(e2e.get("sdd", "-n", namespace, "ha-before"), "Ready")


def test_the_replacement_pod_stands_by(e2e: E2ECluster, run: dict[str, Any]) -> None:
    pods = wait_for("a replacement Pod", lambda: len(_pods(e2e)) == 2 and _pods(e2e), 120)
    names = {p["metadata"]["name"] for p in pods}
    assert run["standby"] in names
    assert run["leader"] not in names
    assert _holder(e2e).startswith(run["standby"])
