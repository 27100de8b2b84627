"""What the missing controllers and the kubelet would write: Job, Pod and Deployment states.

No Job controller, ReplicaSet controller or kubelet runs in the tests, so the tests play them:
the integration tests write these objects through the real API server, the unit tests put
them in the fake cluster.
"""

from __future__ import annotations

import json
from typing import Any

from warmgate.reconcile.cluster import JOB_NAME_LABEL

NOW = "2026-11-29T12:00:00Z"
LATER = "2026-11-29T12:07:30Z"
RUNNER_CODES = {"verified": 0, "unwarmed_shapes": 3}


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


def warmup_pod(namespace: str, job: str) -> dict[str, Any]:
    """A Pod the Job controller would create for ``job``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job[:50]}-x",
            "namespace": namespace,
            "labels": {JOB_NAME_LABEL: job},
        },
        "spec": {"containers": [{"name": "warmup", "image": "vllm-gaudi:test"}]},
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


def serving_pod(namespace: str, deployment: dict[str, Any], name: str) -> dict[str, Any]:
    """A Pod the ReplicaSet controller would create from the Deployment's template."""
    template = deployment["spec"]["template"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
        },
        "spec": {
            "containers": [{"name": "vllm", "image": "vllm-gaudi:test"}],
            "readinessGates": template["spec"]["readinessGates"],
        },
    }


def rolled_out_status(generation: int, ready: int) -> dict[str, Any]:
    """The Deployment controller's status: this generation observed, ``ready`` replicas ready."""
    return {
        "observedGeneration": generation,
        "replicas": ready,
        "updatedReplicas": ready,
        "readyReplicas": ready,
        "availableReplicas": ready,
    }


def condition_map(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The object's status conditions as {type: (status, reason)}."""
    return {c["type"]: (c["status"], c["reason"]) for c in obj["status"]["conditions"]}
