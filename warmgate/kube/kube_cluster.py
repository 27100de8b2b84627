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

Every request carries a connect and a read timeout (`Settings.api_connect_timeout`,
`api_read_timeout`), and every transport failure (a refused, reset or timed-out connection, a
half-open one that never answers, a TLS error) is a `ClusterError` without a status: transient,
retried after the same backoff as a 5xx. Without them a connection reset escaped the sync (the
object waited for its next resync, about 900 s), and a half-open connection held a sync thread
and the object's lock forever (issue 23 item 8).
"""

from __future__ import annotations

import http.client
import json
import time
from typing import Any, Final

import urllib3
from kubernetes import client
from kubernetes import config as kube_config
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest
from warmgate.api.constants import GROUP, PLURAL, VERSION
from warmgate.kube.children import OwnWrites, WatchVersions
from warmgate.kube.cluster import ClusterError, ClusterKind, ListKind, ReadKind
from warmgate.kube.controller_metrics import host_of, observe_request
from warmgate.reconcile.sync.actions import DeleteKind, PatchKind

HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409
JSON: Final = "application/json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
# Lists answered from the apiserver's watch cache: NotOlderThan the last watch event of the kind
# (watched kinds), any version (ConfigMaps: only the garbage collection lists them, and a stale
# answer only delays or repeats a delete: each delete carries the UID read, so it never
# removes an object made since; what decides a delete, the Deployment, the Jobs and the Pods
# that mount the ConfigMaps, is read fresh). ReplicaSets and Events are read from etcd.
# (NotOlderThan another kind's version is no use: a kind's watch cache moves with its own
# events only, and on etcd 3.4 the list waits 3 s and fails 504 "Too large resource version".)
WATCHED_LISTS: Final = frozenset({"Job", "Pod"})
# A stale list of claims only delays a deletion (each is sent with its UID as precondition).
ANY_VERSION_LISTS: Final = frozenset({"ConfigMap", "PersistentVolumeClaim"})
# What a request fails with below HTTP: urllib3's errors (timeouts, resets, protocol errors,
# retries exhausted), the socket's (refused, reset, timed out, TLS) and http.client's.
TRANSPORT_ERRORS: Final = (urllib3.exceptions.HTTPError, OSError, http.client.HTTPException)
# One more try for a connection that could not be opened (it never reached the server, so any
# method may be sent again); none for a request that was sent: the sync's backoff retries it.
RETRIES: Final = urllib3.Retry(total=1, connect=1, read=False, redirect=False, status=False)
# The apiserver's status-less failure (the client's ApiException for a TLS error).
NO_STATUS: Final = 0
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
    "SpecDecodeDeployment": f"/apis/{GROUP}/{VERSION}/namespaces/{{namespace}}/{PLURAL}",
}

# The cluster-wide collections a sync lists (`list_cluster`).
CLUSTER_COLLECTIONS: Final = {"Node": "/api/v1/nodes", "Pod": "/api/v1/pods"}


def _retry_after(exc: ApiException) -> float | None:
    """The Retry-After header of a 429 or 503, in seconds (the server sends whole seconds)."""
    value = (exc.headers or {}).get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class KubeCluster:
    """The operations of `warmgate.kube.cluster.Cluster` against a real API server."""

    def __init__(self, api: client.ApiClient, timeouts: tuple[float, float] = (5.0, 30.0)) -> None:
        self.api = api
        # (connect, read) seconds of every request.
        self.timeouts = timeouts
        # What this adapter wrote, so the watch of the children ignores its echo.
        self.writes = OwnWrites()
        # What the watch of the children delivered last, so lists can come from the cache.
        self.versions = WatchVersions()

    @classmethod
    def connect(
        cls, pool_size: int, timeouts: tuple[float, float], config_file: str | None = None
    ) -> KubeCluster:
        """Log in with the in-cluster ServiceAccount, else $KUBECONFIG (or ``config_file``);
        one client for all, whose pool keeps ``pool_size`` connections (one per thread that
        calls it); every request with the (connect, read) ``timeouts``."""
        return cls(client.ApiClient(configuration(pool_size, config_file)), timeouts)

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
        status, found = request(
            self.api,
            method,
            path,
            params,
            query=query,
            body=body,
            content_type=content_type,
            timeouts=self.timeouts,
            tolerate=tolerate,
        )
        return None if status in tolerate else found

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

    def list_cluster(self, kind: ClusterKind, field_selector: str = "") -> list[Manifest]:
        """Every Node, or the Pods of every namespace, matching a field selector (from the
        apiserver's cache: a count of free cards is a moment's anyway)."""
        query = {"resourceVersion": "0"}
        if field_selector:
            query["fieldSelector"] = field_selector
        _, found = request(
            self.api,
            "GET",
            CLUSTER_COLLECTIONS[kind],
            {},
            query=query,
            body=None,
            timeouts=self.timeouts,
        )
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

    def replace(self, manifest: Manifest) -> Manifest | None:
        """Replace a Deployment or ConfigMap at its resourceVersion: the object as stored;
        None when a newer write won (409)."""
        meta, kind = manifest["metadata"], manifest["kind"]
        args = ("PUT", kind, meta["namespace"], meta["name"])
        replaced = self._send(*args, body=manifest, tolerate=(HTTP_CONFLICT,))
        self._wrote(kind, replaced)
        return replaced

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> Manifest | None:
        """A JSON merge patch (lists are replaced whole): the object as stored; None when the
        object is gone."""
        found = self._send(
            "PATCH",
            kind,
            namespace,
            name,
            body=body,
            content_type=MERGE_PATCH,
            tolerate=(HTTP_NOT_FOUND,),
        )
        self._wrote(kind, found)
        return found

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        """Delete exactly this object (UID precondition); dependents go in the background."""
        body = {"propagationPolicy": "Background", "preconditions": {"uid": uid}}
        tolerate = (HTTP_NOT_FOUND, HTTP_CONFLICT)
        return self._send("DELETE", kind, namespace, name, body=body, tolerate=tolerate) is not None

    def patch_status(
        self, namespace: str, name: str, body: Manifest, resource_version: str | None = None
    ) -> str | None:
        """Merge-patch a SpecDecodeDeployment's status subresource (``body`` is the status);
        the object's resourceVersion after the write.

        With ``resource_version`` the write is refused (ClusterError 409) when the object
        changed since that version: a newer writer (a spec edit, another replica) is never
        overwritten by a status computed from an older object.
        """
        patch: Manifest = {"status": body}
        if resource_version is not None:
            patch["metadata"] = {"resourceVersion": resource_version}
        found = self._send(
            "PATCH", PLURAL, namespace, name, "status", body=patch, content_type=MERGE_PATCH
        )
        version = ((found or {}).get("metadata") or {}).get("resourceVersion")
        return str(version) if version else None

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Follow spec.serving.replicas without touching the plan the Deployment serves."""
        body = {"spec": {"replicas": replicas}}
        scaled = self._send(
            "PATCH", "Deployment", namespace, name, "scale", body=body, content_type=MERGE_PATCH
        )
        self._wrote("Deployment", scaled)

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> Manifest | None:
        """Set one Pod condition (strategic merge: conditions merge by type): the Pod."""
        body = {"status": {"conditions": [condition]}}
        args = ("PATCH", "Pod", namespace, name, "status")
        found = self._send(*args, body=body, content_type=STRATEGIC_MERGE_PATCH)
        self._wrote("Pod", found)
        return found

    def _wrote(self, kind: str, found: Manifest | None) -> bool:
        """Remember the object as written (its watch event is no news); whether it was."""
        self.writes.add(kind, found)
        return found is not None


def request(
    api: client.ApiClient,
    method: str,
    path: str,
    params: dict[str, str],
    *,
    query: dict[str, str] | None,
    body: Manifest | None,
    timeouts: tuple[float, float],
    content_type: str = JSON,
    tolerate: tuple[int, ...] = (),
) -> tuple[int, Manifest]:
    """One request through the client's ApiClient (its authentication, headers, transport and
    retries) as plain JSON, its errors mapped once for every adapter (the Lease's too): the
    status and the answer ({} for a status in ``tolerate``); no answer, or another status
    outside 2xx, raises ClusterError (`unanswered`, `refused`). Counted in
    `rest_client_requests_total` and `rest_client_request_duration_seconds`
    (`controller_metrics`)."""
    headers = {"Accept": JSON}
    if body is not None:
        headers["Content-Type"] = content_type
    method, url, headers, _, _ = api.param_serialize(
        method=method,
        resource_path=path,
        path_params=params,
        query_params=list((query or {}).items()),
        header_params=headers,
        auth_settings=["BearerToken"],
    )
    host = host_of(api.configuration.host)
    started = time.perf_counter()
    try:
        response = api.call_api(method, url, headers, body=body, _request_timeout=timeouts)
        data: bytes = response.read()  # type: ignore[no-untyped-call]
    except Exception as exc:  # no answer (or the client's status-0 ApiException): <error>
        status = exc.status if isinstance(exc, ApiException) else None
        observe_request(method, host, status, time.perf_counter() - started)
        if isinstance(exc, (*TRANSPORT_ERRORS, ApiException)):
            raise unanswered(method, path, exc) from exc
        raise
    observe_request(method, host, response.status, time.perf_counter() - started)
    if not 200 <= response.status <= 299:
        if response.status in tolerate:
            return int(response.status), {}  # its body is the server's, not the object's
        raise refused(response)
    found: Manifest = json.loads(data) if data else {}
    return int(response.status), found


def unanswered(method: str, path: str, exc: Exception) -> ClusterError:
    """The one mapping of a request the API did not answer (for every adapter, the Lease's
    too): the transport's error, or the client's own wrapping of a TLS error (status 0)."""
    if isinstance(exc, ApiException):
        return ClusterError(f"{method} {path}: {exc.reason}", status=exc.status or None)
    return ClusterError(f"{method} {path}: {type(exc).__name__}: {exc}")


def refused(response: Any) -> ClusterError:
    """The one mapping of an API answer outside 2xx (for every adapter, the Lease's too): its
    status, the server's message, and the Retry-After it asked for (429, 503)."""
    exc = ApiException(http_resp=response)
    error = ClusterError(str(exc), status=exc.status, retry_after=_retry_after(exc))
    error.__cause__ = exc
    return error


def configuration(pool_size: int, config_file: str | None = None) -> client.Configuration:
    """The client's configuration: the in-cluster ServiceAccount, else $KUBECONFIG (or
    ``config_file``); a pool of ``pool_size`` connections; urllib3's retries bounded."""
    found = client.Configuration()
    try:
        kube_config.load_incluster_config(client_configuration=found)  # type: ignore[no-untyped-call]
    except kube_config.ConfigException:
        kube_config.load_kube_config(config_file=config_file, client_configuration=found)  # type: ignore[no-untyped-call]
    found.connection_pool_maxsize = pool_size
    # urllib3's default sends a GET up to four times after read errors, each waiting out the
    # read timeout: a frozen apiserver would hold a sync for four timeouts, not one.
    found.retries = RETRIES
    return found
