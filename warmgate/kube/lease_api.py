"""The leader Lease over the official client: get, create, update at a version, wait for a change.

A client of its own (two connections: requests, and a standby's watch), so a renewal never waits
behind the syncs' pool; every request with the connect timeout and a read timeout of at most
half the renew deadline, as kube-scheduler and kube-controller-manager give their election
client (`Timeout = RenewDeadline / 2`), so two tries fit before the deadline.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterator
from typing import Final

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from warmgate.api import Manifest
from warmgate.kube.cluster import ClusterError
from warmgate.kube.controller_metrics import host_of, observe_request
from warmgate.kube.kube_cluster import (
    HTTP_CONFLICT,
    HTTP_NOT_FOUND,
    JSON,
    TRANSPORT_ERRORS,
    configuration,
    request,
)
from warmgate.settings import LeaseSettings

log = logging.getLogger(__name__)

GROUP_VERSION: Final = "coordination.k8s.io/v1"
COLLECTION: Final = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
# The connections of the election's own client.
POOL_SIZE: Final = 2
HTTP_OK: Final = 200


class LeaseError(ClusterError):
    """A Lease request failed (an HTTP error other than the expected ones, or the transport),
    as the cluster adapter maps every API error (`kube_cluster.unanswered`, `refused`)."""

    @classmethod
    def of(cls, error: ClusterError) -> LeaseError:
        return cls(f"the Lease: {error}", error.status, error.retry_after)


class KubeLeases:
    """One Lease, ``namespace``/``name``, through ``api`` (`leader.LeaseApi`)."""

    def __init__(
        self, api: client.ApiClient, namespace: str, name: str, timeouts: tuple[float, float]
    ) -> None:
        self.api, self.namespace, self.name, self.timeouts = api, namespace, name, timeouts

    @classmethod
    def connect(
        cls,
        namespace: str,
        lease: LeaseSettings,
        timeouts: tuple[float, float],
        config_file: str | None = None,
    ) -> KubeLeases:
        """A client of its own (the operator's credentials), with the election's timeouts."""
        connect, read = timeouts
        bounded = (connect, min(read, lease.renew_deadline / 2))
        api = client.ApiClient(configuration(POOL_SIZE, config_file))
        return cls(api, namespace, lease.name, bounded)

    def _request(
        self,
        method: str,
        *,
        name: bool = True,
        query: dict[str, str] | None = None,
        body: Manifest | None = None,
        tolerate: tuple[int, ...] = (),
    ) -> tuple[int, Manifest]:
        path = COLLECTION + ("/{name}" if name else "")
        params = {"namespace": self.namespace, "name": self.name}
        try:
            return request(
                self.api,
                method,
                path,
                params,
                query=query,
                body=body,
                timeouts=self.timeouts,
                tolerate=tolerate,
            )
        except ClusterError as exc:
            raise LeaseError.of(exc) from exc

    def get(self) -> tuple[Manifest, str] | None:
        status, found = self._request("GET", tolerate=(HTTP_NOT_FOUND,))
        if status == HTTP_NOT_FOUND:
            return None
        return dict(found.get("spec") or {}), str(found["metadata"]["resourceVersion"])

    def create(self, spec: Manifest) -> str | None:
        status, found = self._request(
            "POST", name=False, body=self._body(spec), tolerate=(HTTP_CONFLICT,)
        )
        if status == HTTP_CONFLICT:
            return None
        return str(found["metadata"]["resourceVersion"])

    def update(self, spec: Manifest, version: str) -> str | None:
        status, found = self._request(
            "PUT", body=self._body(spec, version), tolerate=(HTTP_CONFLICT,)
        )
        if status == HTTP_CONFLICT:
            return None
        return str(found["metadata"]["resourceVersion"])

    def wait_change(self, version: str, seconds: float) -> None:
        """A watch from ``version``: returns when the Lease is released or deleted (or the
        watch fails: the caller simply tries again), else when the server ends the watch after
        ``seconds``; read to its end, its connection is kept for the next request."""
        query = {
            "watch": "true",
            "fieldSelector": f"metadata.name={self.name}",
            "resourceVersion": version,
            "timeoutSeconds": str(max(1, round(seconds))),
        }
        path = COLLECTION.format(namespace=self.namespace)
        method, url, headers, _, _ = self.api.param_serialize(
            method="GET",
            resource_path=path,
            query_params=list(query.items()),
            header_params={"Accept": JSON},
            auth_settings=["BearerToken"],
        )
        connect, read = self.timeouts
        host, started = host_of(self.api.configuration.host), time.perf_counter()
        answered = False
        try:
            response = self.api.call_api(
                method, url, headers, _request_timeout=(connect, read + seconds)
            )
            answered = True  # a watch's duration: until it started, as client-go's
            observe_request(method, host, response.status, time.perf_counter() - started)
            stream = response.response  # urllib3's, unread: the server flushes each event
            if response.status != HTTP_OK:  # e.g. 403: wait, never retry in a tight loop
                stream.close()
                log.warning(f"Could not watch the leader Lease: HTTP {response.status}")
                time.sleep(seconds)
            elif _released(stream.stream(4096)):
                stream.close()  # mid-stream: the connection cannot be reused
            else:
                stream.release_conn()
        except (*TRANSPORT_ERRORS, ApiException, ValueError) as exc:
            if not answered:
                observe_request(method, host, None, time.perf_counter() - started)
            log.debug(f"The watch of the leader Lease ended: {exc}")

    def _body(self, spec: Manifest, version: str | None = None) -> Manifest:
        meta: Manifest = {"name": self.name, "namespace": self.namespace}
        if version is not None:
            meta["resourceVersion"] = version
        return {"apiVersion": GROUP_VERSION, "kind": "Lease", "metadata": meta, "spec": spec}


def _released(chunks: Iterator[bytes]) -> bool:
    """Whether a watch event shows the Lease released, deleted, or the watch refused (an
    ERROR event, e.g. 410 for a version too old); False once the stream ends without one."""
    pending = b""
    for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in filter(None, lines):
            event = json.loads(line)
            kind = event.get("type")
            spec = (event.get("object") or {}).get("spec") or {}
            if kind in ("DELETED", "ERROR"):
                return True
            if kind in ("ADDED", "MODIFIED") and not spec.get("holderIdentity"):
                return True
    return False


__all__ = ["KubeLeases", "LeaseError"]
