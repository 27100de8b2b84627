"""The cluster as one sync sees it: each read is sent once, the sync's own writes applied to it.

A sync reads some children twice (the warm stage and the garbage collection both list the
parent's Jobs; the serve stage and the drift observation both read the Deployment). Within one
sync, nothing but the sync itself is assumed to change them: a change by anyone else during the
sync (a controller's answer to the sync's own write included) sends a watch event that wakes the
object again. So `SyncReads` answers a repeated read from what the first one returned (a deep
copy: the stages may edit what they read). The sync's own creates and deletes are applied to
what it listed (its other writes make it forget the reads of the kind written, which then go to
the API again).
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any, TypeVar

from warmgate.api import Manifest
from warmgate.reconcile.cluster import Cluster, DeleteKind, ListKind, PatchKind, ReadKind

_T = TypeVar("_T")


def _copy(value: _T) -> _T:
    """A deep copy of JSON data, four times as fast as `copy.deepcopy` (a Job: 31 vs 126 us)."""
    copied: _T = pickle.loads(pickle.dumps(value, pickle.HIGHEST_PROTOCOL))
    return copied


class SyncReads:
    """A `Cluster` for one sync over another one; not shared between syncs or threads."""

    def __init__(self, base: Cluster) -> None:
        self._base = base
        self._seen: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], read: Callable[[], _T]) -> _T:
        if key not in self._seen:
            self._seen[key] = read()
        found: _T = _copy(self._seen[key])
        return found

    def read(self, kind: ReadKind, namespace: str, name: str) -> Manifest | None:
        key = ("read", kind, namespace, name)
        return self._once(key, lambda: self._base.read(kind, namespace, name))

    def list_pods(self, namespace: str, selector: str) -> list[Manifest]:
        key = ("pods", namespace, selector)
        return self._once(key, lambda: self._base.list_pods(namespace, selector))

    def list_objects(self, kind: ListKind, namespace: str, selector: str) -> list[Manifest]:
        key = ("list", kind, namespace, selector)
        return self._once(key, lambda: self._base.list_objects(kind, namespace, selector))

    def events(self, namespace: str, uid: str) -> list[Manifest]:
        return self._once(("events", namespace, uid), lambda: self._base.events(namespace, uid))

    def create(self, manifest: Manifest) -> Manifest | None:
        created = self._base.create(manifest)
        if created is None:  # someone else made it: what else did they do?
            self._forget(manifest["kind"])
        else:
            self._add(manifest["kind"], created)
        return created

    def replace(self, manifest: Manifest) -> bool:
        self._forget(manifest["kind"])
        return self._base.replace(manifest)

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> bool:
        self._forget(kind)
        return self._base.patch(kind, namespace, name, body)

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        deleted = self._base.delete(kind, namespace, name, uid)
        for key, found in self._seen.items():
            if key[:3] == ("list", kind, namespace):
                found[:] = [obj for obj in found if obj["metadata"].get("uid") != uid]
        self._seen.pop(("read", kind, namespace, name), None)
        return deleted

    def patch_status(self, namespace: str, name: str, body: Manifest) -> None:
        # The object's own status: none of the children this sync reads changes.
        self._base.patch_status(namespace, name, body)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        self._forget("Deployment")
        self._base.scale(namespace, name, replicas)

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> None:
        self._forget("Pod")
        self._base.set_pod_condition(namespace, name, condition)

    def _add(self, kind: str, created: Manifest) -> None:
        """The sync's own create, added to what it listed of that kind (selectors of
        ``key=value`` terms, the only ones the stages use; a list by any other is forgotten)."""
        created = _copy(created)  # the caller may edit its answer; every read gets a copy
        meta = created["metadata"]
        labels = meta.get("labels") or {}
        for key in [k for k in self._seen if k[:3] == ("list", kind, meta.get("namespace"))]:
            terms = [term.partition("=") for term in key[3].split(",") if term]
            if any(not eq or "!" in k for k, eq, _ in terms):
                del self._seen[key]
            elif all(labels.get(k) == v for k, _, v in terms):
                self._seen[key].append(created)
        self._seen[("read", kind, meta.get("namespace"), meta.get("name"))] = created

    def _forget(self, kind: str) -> None:
        """Forget the reads of the kind written: the sync's own write changes no other kind
        (what the controllers then change sends watch events, as anyone else's change does)."""
        for key in [k for k in self._seen if k[1] == kind or (kind == "Pod" and k[0] == "pods")]:
            del self._seen[key]
