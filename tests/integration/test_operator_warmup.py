"""The operator's warmup stage: it creates the Job of the plan and trusts only the runner's verdict.

No kubelet or Job controller runs here, so the test plays both: it creates the Job's Pod, writes
the runner's termination summary (docs/runner.md) into the Pod status, and sets the Job's
terminal condition, all through the real API server's status subresources.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml
from support.api_controllers import (
    finish,
    get,
    rolled_out,
    runner_summary,
    seeds_example,
    serve,
    started,
)
from support.kube_objects import condition_map
from support.paths import CRD_PATH
from support.polling import eventually

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_a_proven_plan_gets_its_job_and_is_warmed_only_on_the_runners_verdict(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    obj = started(control_plane, ns, "verified")
    warmup = obj["status"]["warmup"]
    # No Job controller runs in this tier: the Job has no Pod, and Warmed says so (issue 11).
    assert condition_map(obj)["Warmed"] == ("False", "WarmupPending")
    assert obj["status"]["phase"] == "Pending"
    job = get(control_plane, "-n", ns, "job", warmup["jobName"])
    assert job["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "habana.ai/gaudi": "1"
    }
    plan_cm = job["spec"]["template"]["spec"]["volumes"]
    assert any("configMap" in v for v in plan_cm)
    summary = runner_summary("verified", warmup["cacheKey"], kv_blocks=4321)
    finish(control_plane, ns, warmup["jobName"], summary, ok=True)
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/verified", "--for=condition=Warmed", "--timeout=60s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "verified")
    assert condition_map(obj)["Ready"] == ("False", "ServingProgressing")
    # The Deployment exists but no controller rolls it out here: the generation is not done.
    assert condition_map(obj)["Reconciling"] == ("True", "RollingOut")
    assert obj["status"]["warmup"]["durationSeconds"] == 450
    assert obj["status"]["warmup"]["warmedBuckets"] == obj["status"]["plan"]["totalBuckets"]
    assert "KV blocks 4321" in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed"
    )
    assert obj["status"]["warmup"]["kvBlocks"] == 4321
    # The status is the record: the verdict survives the Job, and a change outside the cache
    # key (replicas) reuses it instead of warming again.
    job_name = warmup["jobName"]
    # Background propagation deletes the Job at once; orphaning would wait for a garbage
    # collector, which this control plane does not run.
    control_plane.kubectl(
        "delete", "job", job_name, "-n", ns, "--cascade=background", "--wait=false"
    )
    control_plane.kubectl(
        "delete",
        "pods",
        "-n",
        ns,
        "--wait=false",
        "--grace-period=0",
        "--force",
        "-l",
        f"batch.kubernetes.io/job-name={job_name}",
    )
    control_plane.kubectl(
        "patch",
        "sdd",
        "verified",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"spec": {"serving": {"replicas": 3}}}',
    )
    control_plane.kubectl(
        "wait",
        "-n",
        ns,
        "sdd/verified",
        "--timeout=60s",
        "--for=jsonpath={.status.observedGeneration}=2",
    )
    again = get(control_plane, "-n", ns, "sdd", "verified")
    assert condition_map(again)["Warmed"] == ("True", "WarmupSucceeded")
    assert again["status"]["warmup"]["kvBlocks"] == 4321
    jobs = control_plane.kubectl("get", "jobs", "-n", ns, "-o", "name").stdout
    assert job_name not in jobs


def test_unwarmed_shapes_fail_the_warmup_and_stall(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    warmup = started(control_plane, ns, "unwarmed")["status"]["warmup"]
    shape = "('decode', 24, 1, 768)"
    summary = runner_summary(
        "unwarmed_shapes", warmup["cacheKey"], unwarmed=[shape], reason="1 shape was not warmed up"
    )
    finish(control_plane, ns, warmup["jobName"], summary, ok=False)
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/unwarmed", "--for=condition=Stalled", "--timeout=60s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "unwarmed")
    assert condition_map(obj)["Warmed"] == ("False", "WarmupFailed")
    assert obj["status"]["phase"] == "Failed"
    message = next(c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed")
    assert shape in message


def test_a_completed_job_without_the_runners_verdict_is_not_trusted(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    warmup = started(control_plane, ns, "unverified")["status"]["warmup"]
    wrong_key = runner_summary("verified", "gaudi2-tp1-" + "0" * 40)
    finish(control_plane, ns, warmup["jobName"], wrong_key, ok=True)
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/unverified", "--for=condition=Stalled", "--timeout=60s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "unverified")
    assert condition_map(obj)["Warmed"] == ("False", "WarmupFailed")
    assert "did not verify key" in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed"
    )


def test_serving_follows_verified_plans_only(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    cp, ns = control_plane, module_namespace
    doc = seeds_example(ns, "served")
    first = started(cp, ns, "served", doc)
    finish(
        cp,
        ns,
        first["status"]["warmup"]["jobName"],
        runner_summary("verified", first["status"]["warmup"]["cacheKey"], kv_blocks=4321),
        ok=True,
    )
    cp.kubectl("wait", "-n", ns, "deployment/served-serving", "--for=create", "--timeout=60s")
    deployment = get(cp, "-n", ns, "deployment", "served-serving")
    old_hash = first["status"]["plan"]["hash"]
    assert deployment["metadata"]["annotations"]["warmgate.dev/plan-hash"] == old_hash
    assert deployment["spec"]["template"]["spec"]["readinessGates"] == [
        {"conditionType": "warmgate.dev/warmed"}
    ]
    assert "4321" in json.dumps(deployment["spec"]["template"]["spec"]["containers"])  # KV pin
    assert (
        get(cp, "-n", ns, "service", "served-serving")["spec"]["selector"]
        == (deployment["spec"]["selector"]["matchLabels"])
    )
    # The operator opens the readiness gate of the verified plan's Pods, then Ready follows.
    serve(cp, ns, deployment, "served-serving-a")
    cp.kubectl(
        "wait",
        "-n",
        ns,
        "pod/served-serving-a",
        "--for=condition=warmgate.dev/warmed",
        "--timeout=60s",
    )
    rolled_out(cp, ns, "served-serving", ready=1)
    cp.kubectl("wait", "-n", ns, "sdd/served", "--for=condition=Ready", "--timeout=60s")
    obj = get(cp, "-n", ns, "sdd", "served")
    assert obj["status"]["phase"] == "Ready"
    labels = f'{{name="served",namespace="{ns}"}}'
    exported = operator.get("/metrics")
    for line in (
        f"warmgate_ready{labels} 1.0",
        f"warmgate_warmed{labels} 1.0",
        f"warmgate_serving_ready_replicas{labels} 1.0",
    ):
        assert line in exported, line
    assert obj["status"]["serving"]["planHash"] == old_hash
    # A new spec warms a new plan; the last verified one keeps serving meanwhile.
    doc["spec"]["speculative"]["numSpeculativeTokens"] = 3
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    cp.kubectl("wait", "-n", ns, "sdd/served", "--for=condition=Reconciling", "--timeout=90s")

    def new_plan_warming() -> bool:
        # Reconciling turns True with the Planning notice, before the new plan is written.
        status = get(cp, "-n", ns, "sdd", "served")["status"]
        warmup = status.get("warmup") or {}
        return status["plan"]["hash"] != old_hash and warmup.get("jobName") not in (
            None,
            first["status"]["warmup"]["jobName"],
        )

    assert eventually(new_plan_warming, 90), "the new plan never started warming"
    warming = get(cp, "-n", ns, "sdd", "served")
    assert warming["status"]["plan"]["hash"] != old_hash
    assert warming["status"]["serving"]["planHash"] == old_hash
    assert condition_map(warming)["Ready"] == ("True", "ReplicasReady")
    assert (
        get(cp, "-n", ns, "deployment", "served-serving")["metadata"]["annotations"][
            "warmgate.dev/plan-hash"
        ]
        == old_hash
    )
    new = warming["status"]["warmup"]
    finish(cp, ns, new["jobName"], runner_summary("verified", new["cacheKey"]), ok=True)
    new_hash = warming["status"]["plan"]["hash"]
    annotation = "{.metadata.annotations.warmgate\\.dev/plan-hash}"
    cp.kubectl(
        "wait",
        "-n",
        ns,
        "deployment/served-serving",
        "--timeout=60s",
        f"--for=jsonpath={annotation}={new_hash}",
    )


def test_an_object_from_a_newer_crd_is_reported_once_not_every_resync(
    control_plane: ControlPlane, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Version skew: the cluster's CRD knows a field this operator does not (resync every 1 s).

    The operator starts after the CRD changed, as after a cluster upgrade: a watch opened
    before the change would keep serving objects decoded with the old schema.
    """
    cp, ns = control_plane, namespace
    newer = yaml.safe_load(CRD_PATH.read_text())
    spec_schema = newer["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec_schema["properties"]["futureField"] = {"type": "string", "description": "From v2."}
    operator = None
    try:
        cp.kubectl("replace", "-f", "-", stdin=json.dumps(newer))
        doc = seeds_example(ns, "from-the-future")
        doc["spec"]["futureField"] = "set"
        stored_with_the_new_field(cp, doc)
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
        log = tmp_path_factory.mktemp("skew") / "operator.log"
        operator = OperatorProcess(cp.kubeconfig, ns, log, env={"WARMGATE_RESYNC_SECONDS": "1"})
        operator.wait_alive()
        selector = "involvedObject.name=from-the-future,reason=InvalidSpec"
        first = events_matching(cp, ns, selector, at_least=1)
        time.sleep(4)  # four resyncs: none of them may post again
        assert events_matching(cp, ns, selector, at_least=1) == first == 1
        assert operator.proc.poll() is None
    finally:
        if operator is not None:
            operator.stop()
        current = get(cp, "crd", "specdecodedeployments.warmgate.dev")
        original = yaml.safe_load(CRD_PATH.read_text())
        original["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        cp.kubectl("replace", "-f", "-", stdin=json.dumps(original))


def stored_with_the_new_field(cp: ControlPlane, doc: dict[str, Any]) -> None:
    """Wait until the server stores the new field: it swaps a CRD's storage asynchronously,
    and until then it prunes the field on write even though validation already accepts it."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        dry = cp.kubectl(
            "apply", "--dry-run=server", "-o", "json", "-f", "-", stdin=json.dumps(doc)
        )
        if "futureField" in json.loads(dry.stdout)["spec"]:
            return
        time.sleep(0.2)
    raise TimeoutError("the server never stored spec.futureField")


def events_matching(cp: ControlPlane, ns: str, selector: str, at_least: int) -> int:
    """How many Events (with their repeat counts) match, once at least `at_least` exist."""
    deadline = time.monotonic() + 60
    while True:
        found = get(cp, "events", "-n", ns, "--field-selector", selector)["items"]
        total = sum(int(e.get("count") or 1) for e in found)
        if total >= at_least or time.monotonic() > deadline:
            return total
        time.sleep(0.5)
