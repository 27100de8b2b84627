"""Scenario f: scale 1 -> 2 replicas. The new Pod is gated until the operator opens it, and only
Ready Pods are endpoints of the Service (the real EndpointSlice controller decides)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import E2ECluster, Sampler, gate_open, pod_ready, sdd, wait_for

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


def test_the_new_pod_was_gated_before_it_was_opened(run: dict[str, Any]) -> None:
    pods = [p for s in run["samples"] for p in s["pods"]]
    assert not [p["metadata"]["name"] for p in pods if pod_ready(p) and not gate_open(p)]
    new = [p for p in pods if p["metadata"]["name"] not in run["before"]]
    assert len({p["metadata"]["name"] for p in new}) == 1
    assert any(not gate_open(p) for p in new), "the new Pod was never seen gated"
    assert gate_open(new[-1])


def test_only_ready_pods_are_ready_endpoints(run: dict[str, Any]) -> None:
    for sample in run["samples"]:
        gated_out = {p["metadata"]["name"] for p in sample["pods"] if not gate_open(p)}
        for endpoint in sample["endpoints"]:
            name = endpoint["targetRef"]["name"]
            if endpoint["conditions"].get("ready"):
                assert name not in gated_out, f"{name} was a ready endpoint with its gate closed"
