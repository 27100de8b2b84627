"""The missing controllers and the kubelet, played through the real API server.

No Job controller, ReplicaSet controller, Deployment controller or kubelet runs in the
integration tests: these helpers write what they would (objects from `kube_objects`, through
the status subresources), so the operator process sees a Job finish or a rollout complete.
"""

from __future__ import annotations

import json
from typing import Any

from support import kube_read
from support.examples import example_doc
from support.kube_objects import (
    job_status,
    replica_set,
    rolled_out_status,
    runner_summary,
    serving_pod,
    terminated_status,
    warmup_pod,
)
from warmgate.devcluster.controlplane import ControlPlane

__all__ = [
    "finish",
    "get",
    "replica_set_of",
    "rolled_out",
    "runner_summary",
    "seeds_example",
    "serve",
    "started",
]


def get(cp: ControlPlane, *args: str) -> dict[str, Any]:
    """`kubectl get ... -o json` (read in-process: support/kube_read.py)."""
    return kube_read.get(cp.kubeconfig, cp.kubectl, *args)


def seeds_example(ns: str, name: str) -> dict[str, Any]:
    """The seeds example (28 buckets, fast to plan) under another name and namespace."""
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=name, namespace=ns)
    return doc


def started(
    cp: ControlPlane, ns: str, name: str, doc: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Apply an example under `name` and wait until its warmup Job exists."""
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc or seeds_example(ns, name)))
    cp.kubectl(
        "wait", "-n", ns, f"sdd/{name}", "--for=jsonpath={.status.warmup.jobName}", "--timeout=90s"
    )
    return get(cp, "-n", ns, "sdd", name)


def _patch_status(cp: ControlPlane, ns: str, kind: str, name: str, status: dict[str, Any]) -> None:
    patch = json.dumps({"status": status})
    cp.kubectl("patch", kind, name, "-n", ns, "--subresource=status", "--type=merge", "-p", patch)


def finish(cp: ControlPlane, ns: str, job: str, summary: dict[str, Any] | None, ok: bool) -> None:
    """Play the kubelet and the Job controller: a terminated Pod, then the Job's condition."""
    stored = get(cp, "-n", ns, "job", job)
    uid, template = stored["metadata"]["uid"], stored["spec"]["template"]
    pod = warmup_pod(
        ns, job, uid, tracked=False, template=template
    )  # counted: the Job controller let it go
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(pod))
    _patch_status(cp, ns, "pod", pod["metadata"]["name"], terminated_status(summary, ok))
    _patch_status(cp, ns, "job", job, job_status(ok))


def replica_set_of(cp: ControlPlane, ns: str, deployment: dict[str, Any]) -> dict[str, Any]:
    """Play the Deployment controller: the ReplicaSet of the Deployment's current template,
    owned by it, as the server stores it (with its UID)."""
    rs_name = f"{deployment['metadata']['name']}-g{deployment['metadata']['generation']}"
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(replica_set(ns, deployment, rs_name)))
    return get(cp, "-n", ns, "replicaset", rs_name)


def serve(cp: ControlPlane, ns: str, deployment: dict[str, Any], name: str) -> None:
    """Play the Deployment and ReplicaSet controllers: a ReplicaSet of the Deployment's
    template (owned by it), and a Pod of that ReplicaSet."""
    rs = replica_set_of(cp, ns, deployment)
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(serving_pod(ns, rs, name)))


def rolled_out(cp: ControlPlane, ns: str, name: str, ready: int) -> None:
    """Play the Deployment controller: this generation observed, `ready` replicas ready."""
    generation = get(cp, "-n", ns, "deployment", name)["metadata"]["generation"]
    _patch_status(cp, ns, "deployment", name, rolled_out_status(generation, ready))
