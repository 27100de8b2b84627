"""Helpers for the operator tests that play the Job controller and the kubelet via the API."""

from __future__ import annotations

import json
from typing import Any

import yaml

from warmgate.controlplane import REPO_ROOT, ControlPlane

NOW = "2026-11-29T12:00:00Z"
LATER = "2026-11-29T12:07:30Z"


def get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    return dict(json.loads(cp.kubectl("get", *args, "-o", "json").stdout))


def seeds_example(ns: str, name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(
        (REPO_ROOT / "examples" / "llama31-8b-seeds.yaml").read_text()
    )
    doc["metadata"].update(name=name, namespace=ns)
    return doc


def started(
    cp: ControlPlane, ns: str, name: str, doc: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Apply an example under `name` and wait until its warmup Job exists."""
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc or seeds_example(ns, name)))
    cp.kubectl("wait", "-n", ns, f"sdd/{name}", "--for=jsonpath={.status.warmup.jobName}",
               "--timeout=90s")  # fmt: skip
    return get(cp, "-n", ns, "sdd", name)


def finish(cp: ControlPlane, ns: str, job: str, summary: dict[str, Any] | None, ok: bool) -> None:
    """Play the kubelet and the Job controller: a terminated Pod, then the Job's condition."""
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{job[:50]}-x", "namespace": ns,
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


def serving_pod(cp: ControlPlane, ns: str, deployment: dict[str, Any], name: str) -> None:
    """Play the ReplicaSet controller: a Pod from the Deployment's template."""
    template = deployment["spec"]["template"]
    pod = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": template["metadata"]["labels"]},
           "spec": {"containers": [{"name": "vllm", "image": "vllm-gaudi:test"}],
                    "readinessGates": template["spec"]["readinessGates"]}}  # fmt: skip
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))


def rolled_out(cp: ControlPlane, ns: str, name: str, ready: int) -> None:
    """Play the Deployment controller: this generation observed, `ready` replicas ready."""
    generation = get(cp, "-n", ns, "deployment", name)["metadata"]["generation"]
    status = {"observedGeneration": generation, "replicas": ready, "updatedReplicas": ready,
              "readyReplicas": ready, "availableReplicas": ready}  # fmt: skip
    cp.kubectl("patch", "deployment", name, "-n", ns, "--subresource=status", "--type=merge",
               "-p", json.dumps({"status": status}))  # fmt: skip
