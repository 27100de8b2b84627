"""The cluster as one sync sees it: each read is sent once until the sync writes something.

A sync reads some children twice (the warm stage and the garbage collection both list the
parent's Jobs; the serve stage and the drift observation both read the Deployment). Within one
sync, nothing but the sync itself is assumed to change them: a change by anyone else during the
sync sends a watch event that wakes the object again. So `SyncReads` answers a repeated read from
what the first one returned (a deep copy: the stages may edit what they read), and forgets
everything at the first write, after which every read goes to the API again.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, TypeVar

from warmgate.api import Manifest
from warmgate.reconcile.cluster import Cluster, DeleteKind, ListKind, PatchKind, ReadKind

_T = TypeVar("_T")


class SyncReads:
    """A `Cluster` for one sync over another one; not shared between syncs or threads."""

    def __init__(self, base: Cluster) -> None:
        self._base = base
        self._seen: dict[tuple[Any, ...], Any] = {}

    def _once(self, key: tuple[Any, ...], read: Callable[[], _T]) -> _T:
        if key not in self._seen:
            self._seen[key] = read()
        found: _T = copy.deepcopy(self._seen[key])
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

    def create(self, manifest: Manifest) -> bool:
        self._seen.clear()
        return self._base.create(manifest)

    def replace(self, manifest: Manifest) -> bool:
        self._seen.clear()
        return self._base.replace(manifest)

    def patch(self, kind: PatchKind, namespace: str, name: str, body: Manifest) -> bool:
        self._seen.clear()
        return self._base.patch(kind, namespace, name, body)

    def delete(self, kind: DeleteKind, namespace: str, name: str, uid: str) -> bool:
        self._seen.clear()
        return self._base.delete(kind, namespace, name, uid)

    def patch_status(self, namespace: str, name: str, body: Manifest) -> None:
        # The object's own status: none of the children this sync reads changes.
        self._base.patch_status(namespace, name, body)

    def scale(self, namespace: str, name: str, replicas: int) -> None:
        self._seen.clear()
        self._base.scale(namespace, name, replicas)

    def set_pod_condition(self, namespace: str, name: str, condition: Manifest) -> None:
        self._seen.clear()
        self._base.set_pod_condition(namespace, name, condition)
