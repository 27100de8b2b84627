"""The cluster adapter over the official client: one API client, one connection pool.

Every call goes through `_call`, the one place where an HTTP status becomes an answer: a 404
on a read is "absent" (None), a 409 on a create or replace is "someone else wrote" (False).
Any other API error becomes a `ClusterError` the reconcile reports and retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest
from warmgate.reconcile.cluster import ClusterError, ReadKind

HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409


def _call(
    call: Callable[..., Any], *args: Any, tolerate: int | None = None, **kwargs: Any
) -> Manifest | None:
    """Call without the client's model conversion (the reconcile works on plain JSON dicts).

    None when the API answered ``tolerate``; any other API error raises ClusterError.
    """
    try:
        response = call(*args, _preload_content=False, **kwargs)
    except ApiException as exc:
        if exc.status == tolerate:
            return None
        raise ClusterError(str(exc), status=exc.status) from exc
    data = response.data
    found: Manifest = json.loads(data) if data else {}
    return found


class KubeCluster:
    """The operations of `warmgate.reconcile.cluster.Cluster` against a real API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self._core = client.CoreV1Api(api)
        self._batch = client.BatchV1Api(api)
        self._apps: Any = client.AppsV1Api(api)  # plain-dict bodies: validated at call time
        self._creators: dict[str, Callable[..., Any]] = {
            "ConfigMap": self._core.create_namespaced_config_map,
            "PersistentVolumeClaim": self._core.create_namespaced_persistent_volume_claim,
            "Service": self._core.create_namespaced_service,
            "Job": self._batch.create_namespaced_job,
            "Deployment": self._apps.create_namespaced_deployment,
        }
        self._readers: dict[str, Callable[..., Any]] = {
            "Job": self._batch.read_namespaced_job,
            "Deployment": self._apps.read_namespaced_deployment,
        }

    @classmethod
    def connect(cls) -> KubeCluster:
        """Log in with the in-cluster ServiceAccount, else $KUBECONFIG; one client for all."""
        try:
            kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        except kube_config.ConfigException:
            kube_config.load_kube_config()  # type: ignore[no-untyped-call]
        return cls(client.ApiClient())

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        """The object, or None when it does not exist (404)."""
        return _call(self._readers[kind], name, namespace, tolerate=HTTP_NOT_FOUND)

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        """The Pods matching a label selector."""
        found = _call(self._core.list_namespaced_pod, namespace, label_selector=selector) or {}
        return list(found.get("items") or [])

    def create(self, manifest: Manifest) -> bool:
        """Create the object; False when one of that name already exists (409)."""
        create = self._creators[manifest["kind"]]
        namespace = manifest["metadata"]["namespace"]
        return _call(create, namespace, manifest, tolerate=HTTP_CONFLICT) is not None

    def replace(self, manifest: Manifest) -> bool:
        """Replace a Deployment at its resourceVersion; False when a newer write won (409)."""
        meta = manifest["metadata"]
        replace = self._apps.replace_namespaced_deployment
        args = (meta["name"], meta["namespace"], manifest)
        return _call(replace, *args, tolerate=HTTP_CONFLICT) is not None

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Follow spec.serving.replicas without touching the plan the Deployment serves."""
        body = {"spec": {"replicas": replicas}}
        _call(self._apps.patch_namespaced_deployment_scale, name, namespace, body)

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> None:
        """Set one Pod condition (strategic merge: conditions merge by type)."""
        body = {"status": {"conditions": [condition]}}
        _call(self._core.patch_namespaced_pod_status, name, namespace, body)
