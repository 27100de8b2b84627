"""What the missing controllers and the kubelet would write: Job, Pod and Deployment states.

No Job controller, ReplicaSet controller or kubelet runs in the tests, so the tests play them:
the integration tests write these objects through the real API server, the unit tests put
them in the fake cluster.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from warmgate.kube.cluster import CONTROLLER_UID_LABEL, JOB_NAME_LABEL
from warmgate.reconcile.sync.warmup_state import JOB_TRACKING_FINALIZER

NOW = "2026-11-29T12:00:00Z"
LATER = "2026-11-29T12:07:30Z"
RUNNER_CODES = {"verified": 0, "unwarmed_shapes": 3, "drafter_unverified": 11}


def runner_summary(outcome: str, key: str, **extra: Any) -> dict[str, Any]:
    """The runner's termination summary (docs/runner.md) for one cache key."""
    reason = extra.pop("reason", "")
    return {
        "v": 1,
        "outcome": outcome,
        "code": RUNNER_CODES[outcome],
        "reason": reason,
        "key": key,
        **extra,
    }


def owner(kind: str, name: str, uid: str, api_version: str) -> dict[str, Any]:
    """A controller owner reference, as a controller writes it on what it creates."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def warmup_pod(
    namespace: str,
    job: str,
    job_uid: str,
    suffix: str = "x",
    *,
    tracked: bool = True,
    template: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A Pod the Job controller would create for ``job``: its labels, owner reference, (while
    it tracks the Pod, ``tracked``) its finalizer, and the spec of the Job's pod ``template``
    (the operator reads a verdict only from a Pod that runs it)."""
    meta: dict[str, Any] = {
        "name": f"{job[:50]}-{suffix}",
        "namespace": namespace,
        "labels": {JOB_NAME_LABEL: job, CONTROLLER_UID_LABEL: job_uid},
        "ownerReferences": [owner("Job", job, job_uid, "batch/v1")],
    }
    if tracked:
        meta["finalizers"] = [JOB_TRACKING_FINALIZER]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": copy.deepcopy((template or {}).get("spec"))
        or {"containers": [{"name": "warmup", "image": "vllm-gaudi:test"}]},
    }


def terminated_status(summary: dict[str, Any] | None, ok: bool) -> dict[str, Any]:
    """The warmup Pod's status once the runner exited, its summary in the termination message."""
    terminated: dict[str, Any] = {
        "exitCode": 0 if ok else 3,
        "reason": "Completed" if ok else "Error",
        "startedAt": NOW,
        "finishedAt": LATER,
    }
    if summary is not None:
        terminated["message"] = json.dumps(summary)
    container = {
        "name": "warmup",
        "image": "vllm-gaudi:test",
        "imageID": "",
        "ready": False,
        "restartCount": 0,
        "state": {"terminated": terminated},
    }
    return {"phase": "Succeeded" if ok else "Failed", "containerStatuses": [container]}


def job_status(ok: bool) -> dict[str, Any]:
    """The Job's status once it completed (``ok``) or failed."""

    def cond(type_: str) -> dict[str, str]:
        return {
            "type": type_,
            "status": "True",
            "lastTransitionTime": LATER,
            "lastProbeTime": LATER,
            "reason": "Test",
            "message": "set by the test",
        }

    if ok:
        return {
            "startTime": NOW,
            "completionTime": LATER,
            "succeeded": 1,
            "conditions": [cond("SuccessCriteriaMet"), cond("Complete")],
        }
    return {"startTime": NOW, "failed": 1, "conditions": [cond("FailureTarget"), cond("Failed")]}


def replica_set(namespace: str, deployment: dict[str, Any], name: str) -> dict[str, Any]:
    """The ReplicaSet the Deployment controller would create for the Deployment's template."""
    meta = deployment["metadata"]
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [owner("Deployment", meta["name"], meta["uid"], "apps/v1")],
        },
        "spec": {
            "replicas": deployment["spec"]["replicas"],
            "selector": deployment["spec"]["selector"],
            "template": {
                "metadata": template["metadata"],
                "spec": copy.deepcopy(template["spec"]),
            },
        },
    }


def serving_pod(namespace: str, rs: dict[str, Any], name: str) -> dict[str, Any]:
    """A Pod the ReplicaSet controller would create from its template."""
    template = rs["spec"]["template"]
    meta = rs["metadata"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
            "annotations": template["metadata"].get("annotations") or {},
            "ownerReferences": [owner("ReplicaSet", meta["name"], meta["uid"], "apps/v1")],
        },
        "spec": template["spec"],
    }


def rolled_out_status(
    generation: int, ready: int, updated: int | None = None, replicas: int | None = None
) -> dict[str, Any]:
    """The Deployment controller's status: this generation observed, ``ready`` replicas ready
    and available, ``updated`` of them on the current template (default: all)."""
    return {
        "observedGeneration": generation,
        "replicas": ready if replicas is None else replicas,
        "updatedReplicas": ready if updated is None else updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
    }


def condition_map(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The object's status conditions as {type: (status, reason)}."""
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}
