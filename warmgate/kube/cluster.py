"""The cluster as a sync sees it: the few reads `gather` sends, the writes `apply` sends.

The operator passes an adapter over the official client (`warmgate.kube.kube_cluster`);
unit tests pass an in-memory one. The adapter answers the expected outcomes itself: a read of
a missing object is None (404), a create of an existing name or a replace that lost a race is
None (409), a delete or patch of an object already gone is None or False (404). Any other
failure is a ClusterError, which the sync reports and retries with backoff.
"""

from __future__ import annotations

import logging
from typing import Any, Literal, Protocol

from warmgate.api import Manifest
from warmgate.reconcile.sync.actions import DeleteKind, EventType, PatchKind

ReadKind = Literal["Job", "Deployment", "Service", "PersistentVolumeClaim", "ConfigMap"]
ListKind = Literal[
    "Job",
    "ConfigMap",
    "Pod",
    "ReplicaSet",
    "PersistentVolumeClaim",
    "Deployment",
    "SpecDecodeDeployment",
]
# What a sync lists across the cluster (issue 38: the free Gaudi cards before a sharded Job).
ClusterKind = Literal["Node", "Pod"]
# kopf's per-object logger is a LoggerAdapter; a plain Logger does as well.
Logger = logging.Logger | logging.LoggerAdapter[Any]
# The Job controller labels its Pods with the Job's name and UID (batch/v1, since 1.27).
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
# HTTP statuses a retry can fix: too many requests, and the server or a proxy failing.
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class ClusterError(Exception):
    """An API call failed for another reason than a missing object or a lost race."""

    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        """A retry can succeed: a timeout or lost connection (no status), 429 or a 5xx."""
        return self.status is None or self.status in TRANSIENT_STATUSES


class Cluster(Protocol):
    """The operations one sync uses, on plain-JSON manifests."""

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        """The object, or None when it does not exist."""

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        """The Pods matching a label selector."""

    def list_objects(self, kind: ListKind, namespace: str, selector: str) -> list[Manifest]:
        """The objects of ``kind`` matching a label selector."""

    def events(self, namespace: str, uid: str) -> list[Manifest]:
        """The Events about one object (``involvedObject.uid``)."""

    def list_cluster(self, kind: ClusterKind, field_selector: str = "") -> list[Manifest]:
        """Every Node, or the Pods of every namespace, matching a field selector."""

    def create(self, manifest: Manifest) -> Manifest | None:
        """Create a ConfigMap, PVC, Service, Job or Deployment: the object as the server stored
        it (UID, resourceVersion), None when the name exists."""

    def replace(self, manifest: Manifest) -> Manifest | None:
        """Replace a Deployment or ConfigMap at ``metadata.resourceVersion``: the object as
        stored; None when another write won (409)."""

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> Manifest | None:
        """Apply a JSON merge patch: the object as stored; None when it is gone (404)."""

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        """Delete the object with this UID, its dependents in the background; False when it is
        gone or another object holds the name now (404, 409)."""

    def patch_status(
        self, namespace: str, name: str, body: Manifest, resource_version: str | None = None
    ) -> str | None:
        """Merge-patch a SpecDecodeDeployment's status (a write ahead of long work); with
        ``resource_version``, only while the object is at that version (else ClusterError
        409: never over a newer writer). Returns the object's new resourceVersion."""

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        """Set a Deployment's replicas through the scale subresource."""

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> Manifest | None:
        """Set one Pod condition (conditions merge by type), e.g. a readiness gate: the Pod as
        stored."""


class Events(Protocol):
    """Kubernetes Events about the object being reconciled."""

    def post(self, type_: EventType, reason: str, message: str) -> None:
        """Post one Event (Normal or Warning) on the object."""
