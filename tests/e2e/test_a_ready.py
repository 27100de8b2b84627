"""Scenario a: an SDD on the stand-in engine goes all the way to Ready on real machinery.

The real Job controller runs the real runner in a real Pod, the operator reads the verdict from
the Pod's termination message, the real Deployment controller rolls the serving Pods out, the
kubelet keeps them unready until the operator opens the readiness gate, and `kubectl wait
--for=condition=Ready` returns.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import E2ECluster, Sampler, condition, gate_open, is_true, pod_ready, sdd, wait_for

NAME = "ready"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    """Apply once, sample the serving Pods until Ready, return what was seen."""
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, cache_claim=True))

    def pods() -> dict[str, Any]:
        return e2e.get("pods", "-n", namespace, "-l", "warmgate.dev/component=serving")

    with Sampler(pods) as sampler:
        waited = e2e.wait_ready(namespace, NAME)
    return {"wait": waited, "samples": sampler.samples}


def test_kubectl_wait_for_ready_returns(run: dict[str, Any]) -> None:
    assert run["wait"].returncode == 0, run["wait"].stderr
    assert "condition met" in run["wait"].stdout


def test_the_real_job_ran_the_runner_and_the_operator_read_its_verdict(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    obj = e2e.get("sdd", "-n", namespace, NAME)
    (job,) = e2e.items("jobs", namespace, NAME)
    assert is_true(job, "Complete"), job["status"]
    pods = e2e.get(
        "pods", "-n", namespace, "-l", f"batch.kubernetes.io/job-name={job['metadata']['name']}"
    )
    (pod,) = pods["items"]
    assert pod["spec"]["nodeName"] == "warmgate-node"
    (warmup,) = [s for s in pod["status"]["containerStatuses"] if s["name"] == "warmup"]
    summary = json.loads(warmup["state"]["terminated"]["message"])
    assert summary["outcome"] == "verified"
    assert summary["key"] == obj["status"]["warmup"]["cacheKey"]
    warmed = condition(obj, "Warmed")
    assert (warmed["status"], warmed["reason"]) == ("True", "WarmupSucceeded")


def test_the_cache_claim_was_provisioned_and_bound(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    (claim,) = e2e.items("pvc", namespace, NAME)
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == "warmgate-local"


def test_the_deployment_controller_rolled_out_gated_pods(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    (deployment,) = e2e.items("deployments", namespace, NAME)
    status = deployment["status"]
    assert status["observedGeneration"] == deployment["metadata"]["generation"]
    assert status["updatedReplicas"] == status["readyReplicas"] == 1
    (pod,) = [
        p
        for p in e2e.items("pods", namespace, NAME)
        if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"
    ]
    assert pod_ready(pod)
    assert gate_open(pod)
    gate, ready = condition(pod, "warmgate.dev/warmed"), condition(pod, "Ready")
    assert gate["reason"] == "WarmupVerified"
    # The kubelet made the Pod Ready no earlier than the operator opened the gate.
    assert ready["lastTransitionTime"] >= gate["lastTransitionTime"]


def test_no_serving_pod_was_ever_ready_with_its_gate_closed(run: dict[str, Any]) -> None:
    seen = [p for s in run["samples"] for p in s.data.get("items", [])]
    assert seen, "the sampler saw no serving Pod"
    assert not [p["metadata"]["name"] for p in seen if pod_ready(p) and not gate_open(p)]


def test_only_the_ready_pod_is_a_service_endpoint(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    (service,) = e2e.items("services", namespace, NAME)

    def ready_endpoints() -> list[str]:
        slices = e2e.get(
            "endpointslices",
            "-n",
            namespace,
            "-l",
            f"kubernetes.io/service-name={service['metadata']['name']}",
        )
        return [
            e["targetRef"]["name"]
            for s in slices["items"]
            for e in s.get("endpoints") or []
            if e["conditions"].get("ready")
        ]

    pods = [
        p["metadata"]["name"]
        for p in e2e.items("pods", namespace, NAME)
        if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"
    ]
    assert wait_for("the serving Pod as a ready endpoint", ready_endpoints, 60) == pods
