"""An in-memory cluster for unit tests of the sync: the adapter's contract, no API server.

It keeps objects by (kind, namespace, name), gives them a UID, bumps resourceVersion and
generation the way the API server does, answers a missing read with None and a taken name or
a stale replace with None, as the real adapter does, deletes a Job's Pods with it (the
garbage collector's background propagation), and records every write. ``fail`` makes chosen
operations (`"create"`, or one kind: `"read:Deployment"`) raise ClusterError, as an API server
that refuses or times out would. The tests play the controllers by putting objects (and their
status) in ``objects``.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from support.bad_manifests import merge_patch
from warmgate.api import Manifest
from warmgate.api.conditions import now
from warmgate.kube.cluster import ClusterError, ClusterKind, ListKind, ReadKind
from warmgate.reconcile.sync.actions import DeleteKind, EventType, PatchKind

Key = tuple[str, str, str]


def _key(manifest: Manifest) -> Key:
    meta = manifest["metadata"]
    return (manifest["kind"], meta["namespace"], meta["name"])


def _matches(labels: dict[str, str], selector: str) -> bool:
    """``key=value`` terms, and ``key`` (the label exists), as the API server reads them."""
    terms = (item.partition("=") for item in selector.split(",") if item)
    return all(labels.get(k) == v if eq else k in labels for k, eq, v in terms)


@dataclass
class FakeCluster:
    """The operations of `warmgate.kube.cluster.Cluster`, in memory."""

    objects: dict[Key, Manifest] = field(default_factory=dict)
    writes: list[tuple[str, str, str]] = field(default_factory=list)
    fail: dict[str, ClusterError] = field(default_factory=dict)
    status_writes: list[Manifest] = field(default_factory=list)
    # The creationTimestamp of objects stored from now on (tests move it with their clock);
    # None: the wall clock, as for a sync run without an explicit time.
    created: str | None = None
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def put(self, manifest: Manifest) -> Manifest:
        """Store an object as a controller or another client would (no write recorded)."""
        stored = copy.deepcopy(manifest)
        meta = stored["metadata"]
        version = next(self._versions)
        meta["resourceVersion"] = str(version)
        meta.setdefault("generation", 1)
        meta.setdefault("uid", f"uid-{stored['kind'].lower()}-{version}")
        meta.setdefault("creationTimestamp", self.created or now().strftime("%Y-%m-%dT%H:%M:%SZ"))
        self.objects[_key(stored)] = stored
        return stored

    def get(self, kind: str, namespace: str, name: str) -> Manifest:
        """The stored object (a test's view; raises KeyError when absent)."""
        return self.objects[(kind, namespace, name)]

    def of_kind(self, kind: str) -> list[Manifest]:
        """Every stored object of one kind."""
        return [m for (k, _, _), m in self.objects.items() if k == kind]

    def _check(self, operation: str, kind: str = "") -> None:
        """Raise the failure set for `operation` or `operation:Kind`, if any."""
        for key in (operation, f"{operation}:{kind}"):
            if key in self.fail:
                raise self.fail[key]

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        self._check("read", kind)
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        self._check("list_pods")
        return [
            copy.deepcopy(pod)
            for pod in self.of_kind("Pod")
            if pod["metadata"]["namespace"] == namespace
            and _matches(pod["metadata"].get("labels") or {}, selector)
        ]

    def list_objects(self, kind: ListKind, namespace: str, selector: str) -> list[Manifest]:
        self._check("list", kind)
        return [
            copy.deepcopy(obj)
            for obj in self.of_kind(kind)
            if obj["metadata"]["namespace"] == namespace
            and _matches(obj["metadata"].get("labels") or {}, selector)
        ]

    def list_cluster(self, kind: ClusterKind, field_selector: str = "") -> list[Manifest]:
        """Every Node, or every Pod; ``status.phase!=P`` terms of the selector are applied."""
        self._check("list_cluster", kind)
        skipped = {t.partition("!=")[2] for t in field_selector.split(",") if "phase!=" in t}
        return [
            copy.deepcopy(obj)
            for obj in self.of_kind(kind)
            if (obj.get("status") or {}).get("phase") not in skipped
        ]

    def events(self, namespace: str, uid: str) -> list[Manifest]:
        self._check("events")
        return [
            copy.deepcopy(e)
            for e in self.of_kind("Event")
            if e["metadata"]["namespace"] == namespace and e["involvedObject"]["uid"] == uid
        ]

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> Manifest | None:
        self._check("patch", kind)
        stored = self.objects.get((kind, namespace, name))
        if stored is None:
            return None
        patched = merge_patch(stored, body)
        patched["metadata"]["resourceVersion"] = str(next(self._versions))
        self.objects[(kind, namespace, name)] = patched
        self.writes.append(("patch", kind, name))
        return copy.deepcopy(patched)

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        self._check("delete", kind)
        stored = self.objects.get((kind, namespace, name))
        if stored is None or stored["metadata"]["uid"] != uid:
            return False
        del self.objects[(kind, namespace, name)]
        for pod in self.of_kind("Pod"):  # the garbage collector, in the background
            owners = pod["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid for o in owners):
                del self.objects[("Pod", namespace, pod["metadata"]["name"])]
        self.writes.append(("delete", kind, name))
        return True

    def patch_status(
        self, namespace: str, name: str, body: Manifest, resource_version: str | None = None
    ) -> str | None:
        self._check("patch_status")
        self.status_writes.append(copy.deepcopy(body))
        return None

    def create(self, manifest: Manifest) -> Manifest | None:
        self._check("create", manifest["kind"])
        if _key(manifest) in self.objects:
            return None
        stored = self.put(manifest)
        self.writes.append(("create", *_key(manifest)[::2]))
        return copy.deepcopy(stored)

    def replace(self, manifest: Manifest) -> Manifest | None:
        self._check("replace")
        stored = self.objects[_key(manifest)]
        if manifest["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            return None
        generation = stored["metadata"]["generation"] + 1
        meta = {**manifest["metadata"], "uid": stored["metadata"]["uid"]}
        new = self.put({**manifest, "metadata": meta, "status": stored.get("status", {})})
        new["metadata"]["generation"] = generation
        self.writes.append(("replace", *_key(manifest)[::2]))
        return copy.deepcopy(new)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        self._check("scale")
        stored = self.objects[("Deployment", namespace, name)]
        stored["spec"]["replicas"] = replicas
        stored["metadata"]["generation"] += 1
        stored["metadata"]["resourceVersion"] = str(next(self._versions))
        self.writes.append(("scale", "Deployment", name))

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> Manifest | None:
        self._check("set_pod_condition")
        pod = self.objects[("Pod", namespace, name)]
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        conditions[:] = [c for c in conditions if c["type"] != condition["type"]] + [condition]
        self.writes.append(("set_pod_condition", "Pod", name))
        return copy.deepcopy(pod)


@dataclass
class RecordedEvents:
    """The Events a sync posted, in order."""

    posted: list[tuple[EventType, str, str]] = field(default_factory=list)

    def post(self, type_: EventType, reason: str, message: str) -> None:
        self.posted.append((type_, reason, message))

    def reasons(self) -> list[str]:
        """The posted reasons, in order."""
        return [reason for _, reason, _ in self.posted]

    def clear(self) -> None:
        """Forget what was posted (before the next sync of a test)."""
        self.posted.clear()
