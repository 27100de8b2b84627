"""The operator's warmup stage: it creates the Job of the plan and trusts only the runner's verdict.

No kubelet or Job controller runs here, so the test plays both: it creates the Job's Pod, writes
the runner's termination summary (docs/runner.md) into the Pod status, and sets the Job's
terminal condition, all through the real API server's status subresources.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from warmgate.controlplane import REPO_ROOT, ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
CRD = REPO_ROOT / "crds" / "warmgate.dev_specdecodedeployments.yaml"
NOW = "2026-11-29T12:00:00Z"
LATER = "2026-11-29T12:07:30Z"


@pytest.fixture(scope="module")
def namespace(control_plane: ControlPlane) -> Iterator[str]:
    name = f"warmup-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("apply", "--server-side", "-f", str(CRD))
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD))
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane, namespace: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    env = {"WARMGATE_RESYNC_SECONDS": "1", "WARMGATE_OPERATOR_IMAGE": "warmgate:test"}
    op = OperatorProcess(control_plane.kubeconfig, namespace, log, env=env)
    try:
        yield op.wait_alive()
    finally:
        op.stop()


def get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    return dict(json.loads(cp.kubectl("get", *args, "-o", "json").stdout))


def started(cp: ControlPlane, ns: str, name: str) -> dict[str, Any]:
    """Apply an example under `name` and wait until its warmup Job exists."""
    doc = yaml.safe_load((REPO_ROOT / "examples" / "llama31-8b-seeds.yaml").read_text())
    doc["metadata"].update(name=name, namespace=ns)
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    cp.kubectl("wait", "-n", ns, f"sdd/{name}", "--for=jsonpath={.status.warmup.jobName}",
               "--timeout=90s")  # fmt: skip
    return get(cp, "-n", ns, "sdd", name)


def finish(cp: ControlPlane, ns: str, job: str, summary: dict[str, Any] | None, ok: bool) -> None:
    """Play the kubelet and the Job controller: a terminated Pod, then the Job's condition."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job}-x", "namespace": ns,
                     "labels": {"batch.kubernetes.io/job-name": job}},
        "spec": {"containers": [{"name": "warmup", "image": "vllm-gaudi:test"}]},
    }  # fmt: skip
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    terminated = {"exitCode": 0 if ok else 3, "reason": "Completed" if ok else "Error",
                  "startedAt": NOW, "finishedAt": LATER}  # fmt: skip
    if summary is not None:
        terminated["message"] = json.dumps(summary)
    status = {"phase": "Succeeded" if ok else "Failed", "containerStatuses": [{
        "name": "warmup", "image": "vllm-gaudi:test", "imageID": "", "ready": False,
        "restartCount": 0, "state": {"terminated": terminated}}]}  # fmt: skip
    cp.kubectl("patch", "pod", pod["metadata"]["name"], "-n", ns, "--subresource=status",
               "--type=merge", "-p", json.dumps({"status": status}))  # fmt: skip
    cp.kubectl("patch", "job", job, "-n", ns, "--subresource=status", "--type=merge",
               "-p", json.dumps({"status": job_status(ok)}))  # fmt: skip


def job_status(ok: bool) -> dict[str, Any]:
    def cond(type_: str) -> dict[str, str]:
        return {"type": type_, "status": "True", "lastTransitionTime": LATER,
                "lastProbeTime": LATER, "reason": "Test", "message": "set by the test"}  # fmt: skip

    if ok:
        return {"startTime": NOW, "completionTime": LATER, "succeeded": 1,
                "conditions": [cond("SuccessCriteriaMet"), cond("Complete")]}  # fmt: skip
    return {"startTime": NOW, "failed": 1, "conditions": [cond("FailureTarget"), cond("Failed")]}


def runner_summary(outcome: str, key: str, **extra: Any) -> dict[str, Any]:
    codes = {"verified": 0, "unwarmed_shapes": 3}
    return {"v": 1, "outcome": outcome, "code": codes[outcome], "reason": extra.pop("reason", ""),
            "key": key, **extra}  # fmt: skip


def conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}


def test_a_proven_plan_gets_its_job_and_is_warmed_only_on_the_runners_verdict(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    obj = started(control_plane, namespace, "verified")
    warmup = obj["status"]["warmup"]
    assert conditions(obj)["Warmed"] == ("False", "WarmupRunning")
    assert obj["status"]["phase"] == "Warming"
    job = get(control_plane, "-n", namespace, "job", warmup["jobName"])
    assert job["metadata"]["ownerReferences"][0]["uid"] == obj["metadata"]["uid"]
    assert job["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "habana.ai/gaudi": "1"
    }
    plan_cm = job["spec"]["template"]["spec"]["volumes"]
    assert any("configMap" in v for v in plan_cm)
    summary = runner_summary("verified", warmup["cacheKey"], kv_blocks=4321)
    finish(control_plane, namespace, warmup["jobName"], summary, ok=True)
    control_plane.kubectl("wait", "-n", namespace, "sdd/verified", "--for=condition=Warmed",
                          "--timeout=60s")  # fmt: skip
    obj = get(control_plane, "-n", namespace, "sdd", "verified")
    assert conditions(obj)["Ready"] == ("False", "ServingProgressing")
    assert "Reconciling" not in conditions(obj)
    assert obj["status"]["warmup"]["durationSeconds"] == 450
    assert "KV blocks 4321" in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed"
    )


def test_unwarmed_shapes_fail_the_warmup_and_stall(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    warmup = started(control_plane, namespace, "unwarmed")["status"]["warmup"]
    shape = "('decode', 24, 1, 768)"
    summary = runner_summary("unwarmed_shapes", warmup["cacheKey"], unwarmed=[shape],
                             reason="1 shape was not warmed up")  # fmt: skip
    finish(control_plane, namespace, warmup["jobName"], summary, ok=False)
    control_plane.kubectl("wait", "-n", namespace, "sdd/unwarmed", "--for=condition=Stalled",
                          "--timeout=60s")  # fmt: skip
    obj = get(control_plane, "-n", namespace, "sdd", "unwarmed")
    assert conditions(obj)["Warmed"] == ("False", "WarmupFailed")
    assert obj["status"]["phase"] == "Failed"
    message = next(c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed")
    assert shape in message


def test_a_completed_job_without_the_runners_verdict_is_not_trusted(
    control_plane: ControlPlane, operator: OperatorProcess, namespace: str
) -> None:
    warmup = started(control_plane, namespace, "unverified")["status"]["warmup"]
    wrong_key = runner_summary("verified", "gaudi2-tp1-" + "0" * 40)
    finish(control_plane, namespace, warmup["jobName"], wrong_key, ok=True)
    control_plane.kubectl("wait", "-n", namespace, "sdd/unverified", "--for=condition=Stalled",
                          "--timeout=60s")  # fmt: skip
    obj = get(control_plane, "-n", namespace, "sdd", "unverified")
    assert conditions(obj)["Warmed"] == ("False", "WarmupFailed")
    assert "did not verify key" in next(
        c["message"] for c in obj["status"]["conditions"] if c["type"] == "Warmed"
    )
