"""The cluster adapter over the official client: one API client, one connection pool.

The process makes one `KubeCluster` at start-up (`connect`); its pool keeps as many connections
as kopf has threads to run syncs in, so every call reuses a kept-alive connection.

Requests go through the client's `ApiClient` (its authentication, default headers, transport
and retries) with plain JSON bodies and answers: the reconcile works on JSON dicts, and the
generated typed methods would validate each body into the client's pydantic models and back
(a third of the CPU of a Job's create).

Every call goes through `_send`, the one place where an HTTP status becomes an answer: a 404
on a read is "absent" (None), a 409 on a create or replace is "someone else wrote" (False), a
404 on a delete or patch is "already gone" (False). Any other API error becomes a
`ClusterError` (with the server's Retry-After, if any) that the reconcile reports and retries.
"""

from __future__ import annotations

import json
from typing import Final

from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest
from warmgate.api.constants import GROUP, PLURAL, VERSION
from warmgate.handlers.children import OwnWrites, WatchVersions
from warmgate.reconcile.cluster import ClusterError, DeleteKind, ListKind, PatchKind, ReadKind

HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409
JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
# Lists answered from the apiserver's watch cache: NotOlderThan the last watch event of the kind
# (watched kinds), any version (ConfigMaps: only the garbage collection lists them, and a stale
# answer only delays or repeats a delete). ReplicaSets and Events are read from etcd.
WATCHED_LISTS: Final = frozenset({"Job", "Pod"})
ANY_VERSION_LISTS: Final = frozenset({"ConfigMap"})
# The collection of each kind the operator reads or writes, in a namespace.
COLLECTIONS: Final = {
    "ConfigMap": "/api/v1/namespaces/{namespace}/configmaps",
    "Event": "/api/v1/namespaces/{namespace}/events",
    "PersistentVolumeClaim": "/api/v1/namespaces/{namespace}/persistentvolumeclaims",
    "Pod": "/api/v1/namespaces/{namespace}/pods",
    "Service": "/api/v1/namespaces/{namespace}/services",
    "Job": "/apis/batch/v1/namespaces/{namespace}/jobs",
    "Deployment": "/apis/apps/v1/namespaces/{namespace}/deployments",
    "ReplicaSet": "/apis/apps/v1/namespaces/{namespace}/replicasets",
    PLURAL: f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}",
}


def _retry_after(exc: ApiException) -> float | None:
    """The Retry-After header of a 429 or 503, in seconds (the server sends whole seconds)."""
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class KubeCluster:
    """The operations of `warmgate.reconcile.cluster.Cluster` against a real API server."""

    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        # What this adapter wrote, so the watch of the children ignores its echo.
        self.writes = OwnWrites()
        # What the watch of the children delivered last, so lists can come from the cache.
        self.versions = WatchVersions()

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

    def _send(
        self,
        method: str,
        kind: str,
        namespace: str,
        name: str = "",
        subresource: str = "",
        *,
        query: dict[str, str] | None = None,
        body: Manifest | None = None,
        content_type: str = JSON,
        tolerate: tuple[int, ...] = (),
    ) -> Manifest | None:
        """One request to ``kind``'s collection in ``namespace``, or to its object ``name`` (or
        that object's ``subresource``): the answer as JSON; None when the API answered one of
        ``tolerate``. Any other API error raises ClusterError."""
        path, params = COLLECTIONS[kind], {"namespace": namespace}
        if name:
            path, params["name"] = path + "/{name}", name
        if subresource:
            path += f"/{subresource}"
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        method, url, headers, _, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            path_params=params,
            query_params=list((query or {}).items()),
            header_params=headers,
            auth_settings=["BearerToken"],
        )
        response = self.api.call_api(method, url, headers, body=body)
        data = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status <= 299:
            try:
                ApiException.from_response(http_resp=response, body=None, data=None)  # raises
            except ApiException as exc:
                if exc.status in tolerate:
                    return None
                retry = _retry_after(exc)
                raise ClusterError(str(exc), status=exc.status, retry_after=retry) from exc
        found: Manifest = json.loads(data) if data else {}
        return found

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        """The object, or None when it does not exist (404)."""
        return self._send("GET", kind, namespace, name, tolerate=(HTTP_NOT_FOUND,))

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        """The Pods matching a label selector."""
        return self.list_objects("Pod", namespace, selector)

    def list_objects(self, kind: ListKind, namespace: str, selector: str) -> list[Manifest]:
        """The objects of ``kind`` matching a label selector (from the watch cache when it
        is as new as the watch events the operator acted on, `WatchVersions`)."""
        query = {"labelSelector": selector, **self._freshness(kind, namespace)}
        found = self._send("GET", kind, namespace, query=query)
        return list((found or {}).get("items") or [])

    def _freshness(self, kind: str, namespace: str) -> dict[str, str]:
        """How new a list must be: NotOlderThan the watch's last event, any, or etcd's."""
        last = self.versions.last(kind, namespace) if kind in WATCHED_LISTS else None
        if last is not None:
            return {"resourceVersion": last, "resourceVersionMatch": "NotOlderThan"}
        if kind in ANY_VERSION_LISTS:
            return {"resourceVersion": "0"}
        return {}

    def events(self, namespace: str, uid: str) -> list[Manifest]:
        """The Events about one object, e.g. the Job controller's FailedCreate."""
        query = {"fieldSelector": f"involvedObject.uid={uid}"}
        found = self._send("GET", "Event", namespace, query=query) or {}
        return list(found.get("items") or [])

    def create(self, manifest: Manifest) -> Manifest | None:
        """Create the object: the server's answer; None when the name already exists (409)."""
        kind, namespace = manifest["kind"], manifest["metadata"]["namespace"]
        created = self._send("POST", kind, namespace, body=manifest, tolerate=(HTTP_CONFLICT,))
        self._wrote(kind, created)
        return created

    def replace(self, manifest: Manifest) -> bool:
        """Replace a Deployment at its resourceVersion; False when a newer write won (409)."""
        meta = manifest["metadata"]
        args = ("PUT", "Deployment", meta["namespace"], meta["name"])
        return self._wrote(
            "Deployment", self._send(*args, body=manifest, tolerate=(HTTP_CONFLICT,))
        )

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> bool:
        """A JSON merge patch (lists are replaced whole); False when the object is gone."""
        found = self._send(
            "PATCH",
            kind,
            namespace,
            name,
            body=body,
            content_type=MERGE_PATCH,
            tolerate=(HTTP_NOT_FOUND,),
        )
        return self._wrote(kind, found)

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        """Delete exactly this object (UID precondition); dependents go in the background."""
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        tolerate = (HTTP_NOT_FOUND, HTTP_CONFLICT)
        return self._send("DELETE", kind, namespace, name, body=body, tolerate=tolerate) is not None

    def patch_status(self, namespace: str, name: str, body: Manifest) -> None:
        """Merge-patch a SpecDecodeDeployment's status subresource (``body`` is the status)."""
        patch = {"status": body}
        self._send("PATCH", PLURAL, namespace, name, "status", body=patch, content_type=MERGE_PATCH)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Follow spec.serving.replicas without touching the plan the Deployment serves."""
        body = {"spec": {"replicas": replicas}}
        scaled = self._send(
            "PATCH", "Deployment", namespace, name, "scale", body=body, content_type=MERGE_PATCH
        )
        self._wrote("Deployment", scaled)

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> None:
        """Set one Pod condition (strategic merge: conditions merge by type)."""
        body = {"status": {"conditions": [condition]}}
        args = ("PATCH", "Pod", namespace, name, "status")
        self._wrote("Pod", self._send(*args, body=body, content_type=STRATEGIC_MERGE_PATCH))

    def _wrote(self, kind: str, found: Manifest | None) -> bool:
        """Remember the object as written (its watch event is no news); whether it was."""
        self.writes.add(kind, found)
        return found is not None
