"""Scenario p: `kubectl delete sdd X && kubectl apply -f x.yaml` while X serves (issue 23 item 5).

The new object has another UID, and its children the same (content-hashed) names as the old
object's, which the real garbage collector removes in the background: until it has, each name
the new object wants is held by a child of the old one, which it must neither adopt nor
change (Stalled, reason NotOwned). Once they are gone, it warms its plan again (it has no
record of the old object's verdict) and serves. The scenario measures how long that takes.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from e2e_support import (
    E2ECluster,
    Manifest,
    condition,
    gate_open,
    is_true,
    pod_ready,
    sdd,
    wait_for,
)

NAME = "replaced"
KINDS = "jobs,configmaps,deployments,services,replicasets,pods"


def _serving_pods(pods: list[Manifest]) -> list[Manifest]:
    return [p for p in pods if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"]


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    ns = namespace
    manifest = sdd(NAME, ns, e2e.images.engine.ref)
    e2e.apply(manifest)
    e2e.wait_ready(ns, NAME, check=True)
    old = e2e.get("sdd", "-n", ns, NAME)
    old_uid = old["metadata"]["uid"]
    samples: list[Manifest] = []
    marks: dict[str, float] = {}

    def sample() -> None:
        obj = e2e.get_or_none("sdd", "-n", ns, NAME)
        pods = _serving_pods(e2e.items("pods", ns, NAME))
        samples.append({"t": time.monotonic(), "sdd": obj, "pods": pods})

    def until(what: str, check: Any, timeout: float = 240.0) -> Any:
        return wait_for(what, lambda: (sample(), check())[1], timeout)

    def of_old() -> list[Manifest]:
        children = e2e.items(KINDS, ns, NAME)
        return [c for c in children if old_uid in str(c["metadata"].get("ownerReferences"))]

    marks["delete started"] = time.monotonic()
    e2e.kubectl("delete", "sdd", NAME, "-n", ns, "--timeout=120s")
    marks["deleted"] = time.monotonic()
    e2e.apply(manifest)
    marks["applied again"] = time.monotonic()
    new = until("the new object", lambda: e2e.get_or_none("sdd", "-n", ns, NAME), 30)
    until("the old object's children to be collected", lambda: not of_old(), 240)
    marks["old children collected"] = time.monotonic()

    def ready() -> Manifest | None:
        obj = e2e.get("sdd", "-n", ns, NAME)
        return obj if is_true(obj, "Ready") else None

    final = until("the new object Ready", ready, 300)
    marks["Ready"] = time.monotonic()
    _report(marks, samples)
    return {"old": old, "new": new, "final": final, "samples": samples, "marks": marks}


def _report(marks: dict[str, float], samples: list[Manifest]) -> None:
    """The recovery figures of docs/operator.md ("Fault scenarios on the real node")."""
    for (before, at), (after, then) in itertools.pairwise(marks.items()):
        print(f"scenario p: {before} -> {after}: {then - at:.1f} s")
    stalled = [s["t"] for s in samples if _not_owned(s["sdd"])]
    if stalled:
        print(f"scenario p: Stalled NotOwned seen for {stalled[-1] - stalled[0]:.1f} s")
    serving = [s["t"] for s in samples if any(pod_ready(p) for p in s["pods"])]
    if serving:
        gap = max((b - a for a, b in itertools.pairwise(serving)), default=0.0)
        print(f"scenario p: longest time without a ready serving Pod: {gap:.1f} s")


def _not_owned(obj: Manifest | None) -> bool:
    return condition(obj, "Stalled").get("reason") == "NotOwned"


def test_the_new_object_serves_from_its_own_children(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    uid = run["final"]["metadata"]["uid"]
    assert uid != run["old"]["metadata"]["uid"]
    assert is_true(run["final"], "Warmed")
    children = e2e.items("jobs,configmaps,deployments,services", namespace, NAME)
    kinds = {c["kind"] for c in children}
    assert {"Job", "ConfigMap", "Deployment", "Service"} <= kinds
    for child in children:
        owners = child["metadata"].get("ownerReferences") or []
        assert [o["uid"] for o in owners if o.get("controller")] == [uid], child["metadata"]
    pods = _serving_pods(e2e.items("pods", namespace, NAME))
    assert pods
    assert all(pod_ready(p) and gate_open(p) for p in pods)


def test_while_the_old_children_held_the_names_the_new_object_said_not_owned(
    run: dict[str, Any],
) -> None:
    """What the user reads meanwhile: Stalled (if at all) only for NotOwned, never Ready on
    the old object's Deployment."""
    uid = run["final"]["metadata"]["uid"]
    ours = [s["sdd"] for s in run["samples"] if s["sdd"] and s["sdd"]["metadata"]["uid"] == uid]
    assert ours
    # The wait for Ready reads the object after its last sample: the Ready read comes last.
    ours.append(run["final"])
    stalled = {condition(s, "Stalled").get("reason") for s in ours if is_true(s, "Stalled")}
    assert stalled <= {"NotOwned"}
    first_ready = next(i for i, s in enumerate(ours) if is_true(s, "Ready"))
    assert all(not _not_owned(s) for s in ours[first_ready:])
