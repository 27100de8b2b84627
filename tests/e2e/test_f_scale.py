"""Scenario f: scale 1 -> 2 replicas. The new Pod carries the readiness gate, the operator opens
it (at once: the Pod runs the plan already verified), the kubelet makes it Ready only once the
engine answers /health as well, and only Ready Pods are ready endpoints of the Service (the real
EndpointSlice controller decides)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import E2ECluster, Sampler, condition, gate_open, pod_ready, sdd, wait_for

NAME = "scale"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, replicas=1))
    e2e.kubectl("wait", "-n", namespace, f"sdd/{NAME}", "--for=condition=Ready", "--timeout=300s")
    jobs_before = len(e2e.items("jobs", namespace, NAME))
    service = f"{NAME}-serving"
    before = [p["metadata"]["name"] for p in e2e.items("pods", namespace, NAME)]

    def probe() -> dict[str, Any]:
        pods = [
            p
            for p in e2e.items("pods", namespace, NAME)
            if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"
        ]
        slices = e2e.get(
            "endpointslices", "-n", namespace, "-l", f"kubernetes.io/service-name={service}"
        )["items"]
        return {"pods": pods, "endpoints": [e for s in slices for e in s.get("endpoints") or []]}

    with Sampler(probe) as sampler:
        patch = {"spec": {"serving": {"replicas": 2}}}
        e2e.kubectl("patch", "sdd", NAME, "-n", namespace, "--type=merge", "-p", json.dumps(patch))

        def two_ready() -> bool:
            seen = probe()
            ready = [e for e in seen["endpoints"] if e["conditions"].get("ready")]
            return len(seen["pods"]) == 2 and len(ready) == 2

        wait_for("two ready endpoints", two_ready, 240)
        e2e.kubectl(
            "wait", "-n", namespace, f"sdd/{NAME}", "--for=condition=Ready", "--timeout=120s"
        )
    return {
        "samples": [s.data for s in sampler.samples],
        "jobs_before": jobs_before,
        "before": before,
    }


def test_scaling_rewarms_nothing(e2e: E2ECluster, namespace: str, run: dict[str, Any]) -> None:
    assert len(e2e.items("jobs", namespace, NAME)) == run["jobs_before"] == 1


def test_the_new_pod_became_ready_only_after_its_gate_opened(run: dict[str, Any]) -> None:
    pods = [p for s in run["samples"] for p in s["pods"]]
    assert not [p["metadata"]["name"] for p in pods if pod_ready(p) and not gate_open(p)]
    new = [p for p in pods if p["metadata"]["name"] not in run["before"]]
    assert len({p["metadata"]["name"] for p in new}) == 1
    assert any(not pod_ready(p) for p in new), "the new Pod was never seen starting"
    last = new[-1]
    gate, ready = condition(last, "warmgate.dev/warmed"), condition(last, "Ready")
    assert gate["reason"] == "WarmupVerified"
    assert ready["status"] == "True"
    assert ready["lastTransitionTime"] >= gate["lastTransitionTime"]


def test_only_ready_pods_are_ready_endpoints(run: dict[str, Any]) -> None:
    seen_not_ready = False
    for sample in run["samples"]:
        by_name = {p["metadata"]["name"]: p for p in sample["pods"]}
        for endpoint in sample["endpoints"]:
            pod = by_name.get(endpoint["targetRef"]["name"])
            if endpoint["conditions"].get("ready"):
                assert pod is not None, endpoint
                assert pod_ready(pod), endpoint
                assert gate_open(pod), endpoint
            else:
                seen_not_ready = True
    assert seen_not_ready, "the starting Pod never showed up as a not-ready endpoint"
