"""The cluster adapter over the official client: one API client, one connection pool.

The process makes one `KubeCluster` at start-up (`connect`); its pool keeps as many connections
as kopf has threads to run syncs in, so every call reuses a kept-alive connection.

Every call goes through `_call`, the one place where an HTTP status becomes an answer: a 404
on a read is "absent" (None), a 409 on a create or replace is "someone else wrote" (False), a
404 on a delete or patch is "already gone" (False). Any other API error becomes a
`ClusterError` (with the server's Retry-After, if any) that the reconcile reports and retries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest
from warmgate.api.constants import GROUP, PLURAL, VERSION
from warmgate.handlers.children import OwnWrites, WatchVersions
from warmgate.reconcile.cluster import ClusterError, DeleteKind, ListKind, PatchKind, ReadKind

HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409
MERGE_PATCH: Final = "application/merge-patch+json"
# Lists answered from the apiserver's watch cache: NotOlderThan the last watch event of the kind
# (watched kinds), any version (ConfigMaps: only the garbage collection lists them, and a stale
# answer only delays or repeats a delete). ReplicaSets and Events are read from etcd.
WATCHED_LISTS: Final = frozenset({"Job", "Pod"})
ANY_VERSION_LISTS: Final = frozenset({"ConfigMap"})


def _retry_after(exc: ApiException) -> float | None:
    """The Retry-After header of a 429 or 503, in seconds (the server sends whole seconds)."""
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _call(
    call: Callable[..., Any], *args: Any, tolerate: tuple[int, ...] = (), **kwargs: Any
) -> Manifest | None:
    """Call without the client's model conversion (the reconcile works on plain JSON dicts).

    None when the API answered one of ``tolerate``; any other API error raises ClusterError.
    """
    try:
        response = call(*args, _preload_content=False, **kwargs)
    except ApiException as exc:
        if exc.status in tolerate:
            return None
        raise ClusterError(str(exc), status=exc.status, retry_after=_retry_after(exc)) from exc
    data = response.data
    found: Manifest = json.loads(data) if data else {}
    return found


class KubeCluster:
    """The operations of `warmgate.reconcile.cluster.Cluster` against a real API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        # What this adapter wrote, so the watch of the children ignores its echo.
        self.writes = OwnWrites()
        # What the watch of the children delivered last, so lists can come from the cache.
        self.versions = WatchVersions()
        core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self._core, self._batch = core, batch
        self._apps: Any = client.AppsV1Api(api)  # plain-dict bodies: validated at call time
        self._custom = client.CustomObjectsApi(api)
        self._creators: dict[str, Callable[..., Any]] = {
            "ConfigMap": core.create_namespaced_config_map,
            "PersistentVolumeClaim": core.create_namespaced_persistent_volume_claim,
            "Service": core.create_namespaced_service,
            "Job": batch.create_namespaced_job,
            "Deployment": self._apps.create_namespaced_deployment,
        }
        self._readers: dict[str, Callable[..., Any]] = {
            "Job": batch.read_namespaced_job,
            "Deployment": self._apps.read_namespaced_deployment,
            "Service": core.read_namespaced_service,
            "PersistentVolumeClaim": core.read_namespaced_persistent_volume_claim,
        }
        self._listers: dict[str, Callable[..., Any]] = {
            "Job": batch.list_namespaced_job,
            "ConfigMap": core.list_namespaced_config_map,
            "Pod": core.list_namespaced_pod,
            "ReplicaSet": self._apps.list_namespaced_replica_set,
        }
        self._patchers: dict[str, Callable[..., Any]] = {
            "Job": batch.patch_namespaced_job,
            "Service": core.patch_namespaced_service,
        }
        self._deleters: dict[str, Callable[..., Any]] = {
            "Job": batch.delete_namespaced_job,
            "ConfigMap": core.delete_namespaced_config_map,
        }

    @classmethod
    def connect(cls, pool_size: int) -> KubeCluster:
        """Log in with the in-cluster ServiceAccount, else $KUBECONFIG; one client for all,
        whose pool keeps ``pool_size`` connections (one per thread that calls it)."""
        try:
            kube_config.load_incluster_config()  # type: ignore[no-untyped-call]
        except kube_config.ConfigException:
            kube_config.load_kube_config()  # type: ignore[no-untyped-call]
        configuration = client.Configuration.get_default_copy()
        configuration.connection_pool_maxsize = pool_size
        return cls(client.ApiClient(configuration))

    def connections(self) -> tuple[int, int]:
        """(connections opened, requests sent) by this client so far (urllib3's counters)."""
        by_host = self.api.rest_client.pool_manager.pools  # a lock-guarded container
        pools = [by_host.get(key) for key in by_host.keys()]  # noqa: SIM118 - it has no __iter__
        live = [pool for pool in pools if pool is not None]
        return sum(p.num_connections for p in live), sum(p.num_requests for p in live)

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        """The object, or None when it does not exist (404)."""
        return _call(self._readers[kind], name, namespace, tolerate=(HTTP_NOT_FOUND,))

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        """The Pods matching a label selector."""
        return self.list_objects("Pod", namespace, selector)

    def list_objects(self, kind: ListKind, namespace: str, selector: str) -> list[Manifest]:
        """The objects of ``kind`` matching a label selector (from the watch cache when it
        is as new as the watch events the operator acted on, `WatchVersions`)."""
        fresh: dict[str, Any] = self._freshness(kind, namespace)
        found = _call(self._listers[kind], namespace, label_selector=selector, **fresh)
        return list((found or {}).get("items") or [])

    def _freshness(self, kind: str, namespace: str) -> dict[str, str]:
        """How new a list must be: NotOlderThan the watch's last event, any, or etcd's."""
        last = self.versions.last(kind, namespace) if kind in WATCHED_LISTS else None
        if last is not None:
            return {"resource_version": last, "resource_version_match": "NotOlderThan"}
        if kind in ANY_VERSION_LISTS:
            return {"resource_version": "0"}
        return {}

    def events(self, namespace: str, uid: str) -> list[Manifest]:
        """The Events about one object, e.g. the Job controller's FailedCreate."""
        selector = f"involvedObject.uid={uid}"
        found = _call(self._core.list_namespaced_event, namespace, field_selector=selector) or {}
        return list(found.get("items") or [])

    def create(self, manifest: Manifest) -> Manifest | None:
        """Create the object: the server's answer; None when the name already exists (409)."""
        create = self._creators[manifest["kind"]]
        namespace = manifest["metadata"]["namespace"]
        created = _call(create, namespace, manifest, tolerate=(HTTP_CONFLICT,))
        self._wrote(manifest["kind"], created)
        return created

    def replace(self, manifest: Manifest) -> bool:
        """Replace a Deployment at its resourceVersion; False when a newer write won (409)."""
        meta = manifest["metadata"]
        replace = self._apps.replace_namespaced_deployment
        args = (meta["name"], meta["namespace"], manifest)
        return self._wrote("Deployment", _call(replace, *args, tolerate=(HTTP_CONFLICT,)))

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> bool:
        """A JSON merge patch (lists are replaced whole); False when the object is gone."""
        patch = self._patchers[kind]
        found = _call(
            patch, name, namespace, body, _content_type=MERGE_PATCH, tolerate=(HTTP_NOT_FOUND,)
        )
        return self._wrote(kind, found)

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        """Delete exactly this object (UID precondition); dependents go in the background."""
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        delete = self._deleters[kind]
        tolerate = (HTTP_NOT_FOUND, HTTP_CONFLICT)
        return _call(delete, name, namespace, body=body, tolerate=tolerate) is not None

    def patch_status(self, namespace: str, name: str, body: Manifest) -> None:
        """Merge-patch a SpecDecodeDeployment's status subresource (``body`` is the status)."""
        patch = self._custom.patch_namespaced_custom_object_status
        args = (GROUP, VERSION, namespace, PLURAL, name, {"status": body})
        _call(patch, *args, _content_type=MERGE_PATCH)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Follow spec.serving.replicas without touching the plan the Deployment serves."""
        body = {"spec": {"replicas": replicas}}
        self._wrote(
            "Deployment", _call(self._apps.patch_namespaced_deployment_scale, name, namespace, body)
        )

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> None:
        """Set one Pod condition (strategic merge: conditions merge by type)."""
        body = {"status": {"conditions": [condition]}}
        self._wrote("Pod", _call(self._core.patch_namespaced_pod_status, name, namespace, body))

    def _wrote(self, kind: str, found: Manifest | None) -> bool:
        """Remember the object as written (its watch event is no news); whether it was."""
        self.writes.add(kind, found)
        return found is not None
