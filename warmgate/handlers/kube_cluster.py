"""Reads and creates the children of a SpecDecodeDeployment with the official client (sync)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest

HTTP_NOT_FOUND = 404
HTTP_CONFLICT = 409
# The Job controller labels its Pods with the Job's name (batch/v1, since 1.27).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


def _raw(call: Any, *args: Any, **kwargs: Any) -> Any:
    """Call without the client's model conversion: the handlers work on plain JSON dicts."""
    response = call(*args, _preload_content=False, **kwargs)
    return json.loads(response.data)


def _read_or_none(call: Any, name: str, namespace: str) -> Manifest | None:
    """The object, or None when it does not exist (404)."""
    try:
        found: Manifest = _raw(call, name, namespace)
    except ApiException as exc:
        if exc.status == HTTP_NOT_FOUND:
            return None
        raise
    return found


def read_job(namespace: str, name: str) -> Manifest | None:
    """The Job, or None when it does not exist."""
    return _read_or_none(client.BatchV1Api().read_namespaced_job, name, namespace)


def job_pods(namespace: str, job_name: str) -> list[Manifest]:
    """The Pods the Job controller created for that Job."""
    pods = _raw(
        client.CoreV1Api().list_namespaced_pod,
        namespace,
        label_selector=f"{JOB_NAME_LABEL}={job_name}",
    )
    return list(pods.get("items") or [])


def create_if_absent(manifest: Manifest) -> bool:
    """Create a ConfigMap, PVC, Service or Job; False when one of that name already exists."""
    namespace = manifest["metadata"]["namespace"]
    core, batch = client.CoreV1Api(), client.BatchV1Api()
    creators: dict[str, Callable[..., Any]] = {
        "ConfigMap": core.create_namespaced_config_map,
        "PersistentVolumeClaim": core.create_namespaced_persistent_volume_claim,
        "Service": core.create_namespaced_service,
        "Job": batch.create_namespaced_job,
    }
    create = creators[manifest["kind"]]
    try:
        create(namespace, manifest)
    except ApiException as exc:
        if exc.status == HTTP_CONFLICT:
            return False
        raise
    return True


def read_deployment(namespace: str, name: str) -> Manifest | None:
    """The Deployment, or None when it does not exist."""
    return _read_or_none(client.AppsV1Api().read_namespaced_deployment, name, namespace)


def apply_deployment(desired: Manifest, existing: Manifest | None) -> bool:
    """Create the Deployment, or replace it with the desired one (optimistic locking).

    A conflict is not an error: another sync wrote first, and the next one converges. Returns
    whether this call wrote.
    """
    apps: Any = client.AppsV1Api()  # plain-dict bodies: the client validates them at call time
    namespace = desired["metadata"]["namespace"]
    try:
        if existing is None:
            apps.create_namespaced_deployment(namespace, desired)
            return True
        version = existing["metadata"]["resourceVersion"]
        body = {**desired, "metadata": {**desired["metadata"], "resourceVersion": version}}
        apps.replace_namespaced_deployment(desired["metadata"]["name"], namespace, body)
    except ApiException as exc:
        # The resync timer and a change handler may race: 409 means the other one wrote first
        # (AlreadyExists, or a newer resourceVersion). The next sync re-reads and converges.
        if exc.status != HTTP_CONFLICT:
            raise
        return False
    return True


def scale_deployment(namespace: str, name: str, replicas: int) -> None:
    """Follow spec.serving.replicas without touching the plan the Deployment serves."""
    client.AppsV1Api().patch_namespaced_deployment_scale(
        name, namespace, {"spec": {"replicas": replicas}}
    )


def pods(namespace: str, selector: str) -> list[Manifest]:
    """Pods matching a label selector."""
    found = _raw(client.CoreV1Api().list_namespaced_pod, namespace, label_selector=selector)
    return list(found.get("items") or [])


def set_pod_condition(namespace: str, name: str, condition: Manifest) -> None:
    """Set one Pod condition (strategic merge: conditions merge by type), e.g. a readiness gate."""
    client.CoreV1Api().patch_namespaced_pod_status(
        name, namespace, {"status": {"conditions": [condition]}}
    )
