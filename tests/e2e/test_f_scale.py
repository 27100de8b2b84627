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
# A hand-edited image on the machine's own (absent) registry: the pull fails on loopback.
DRIFTED = "localhost/warmgate-drifted:1"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, replicas=1))
    e2e.wait_ready(namespace, NAME, check=True)
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
        e2e.wait_ready(namespace, NAME, timeout_s=120, check=True)
    # The sampler's last round may predate the endpoint check that saw both Pods ready: end
    # with a sample taken after it.
    return {
        "samples": [s.data for s in sampler.samples] + [probe()],
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
    """A Pod's endpoint turns ready no earlier than the Pod turns Ready, and never while its gate
    is closed. (Readiness is compared by first occurrence: once, a Pod read just after its ready
    endpoint showed Ready=False again, so a per-sample comparison would be racy.)"""
    first_ready: dict[str, int] = {}
    first_endpoint: dict[str, int] = {}
    seen_not_ready = False
    for i, sample in enumerate(run["samples"]):
        by_name = {p["metadata"]["name"]: p for p in sample["pods"]}
        for name, pod in by_name.items():
            if pod_ready(pod):
                first_ready.setdefault(name, i)
        for endpoint in sample["endpoints"]:
            name = endpoint["targetRef"]["name"]
            if not endpoint["conditions"].get("ready"):
                seen_not_ready = True
                continue
            first_endpoint.setdefault(name, i)
            assert name in by_name, endpoint
            assert gate_open(by_name[name]), endpoint
    assert seen_not_ready, "the starting Pod never showed up as a not-ready endpoint"
    for name, i in first_endpoint.items():
        # Endpoints are read before Pods: the Pod read of the same sample (or the next) is later.
        assert first_ready.get(name, len(run["samples"])) <= i + 1, name


def test_hand_edits_of_the_deployment_and_service_are_repaired(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    """Issue 11 item 12: `kubectl edit` of the operator's Deployment and Service is undone
    within a resync or two, by the real API server's update and patch."""
    name = f"{NAME}-serving"
    deployment = e2e.get("deployment", "-n", namespace, name)
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    edit = [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": DRIFTED}]
    e2e.kubectl("patch", "deployment", name, "-n", namespace, "--type=json", "-p", json.dumps(edit))
    service = {"spec": {"type": "NodePort", "ports": [{"name": "http", "port": 9000}]}}
    e2e.kubectl(
        "patch", "service", name, "-n", namespace, "--type=merge", "-p", json.dumps(service)
    )

    def repaired() -> bool:
        live = e2e.get("deployment", "-n", namespace, name)["spec"]["template"]["spec"]
        svc = e2e.get("service", "-n", namespace, name)["spec"]
        ports = [p["port"] for p in svc["ports"]]
        return live["containers"][0]["image"] == image and (svc["type"], ports) == (
            "ClusterIP",
            [8000],
        )

    wait_for("the operator to repair the drift", repaired, 60)

    def both_said() -> bool:  # the Events are posted after the writes they tell of
        got = e2e.get("events", "-n", namespace, "--field-selector", "reason=DriftRepaired")
        return len(got["items"]) >= 2

    wait_for("the operator's DriftRepaired Events", both_said, 30)
