"""Apply a decision: the one place where the operator writes to the cluster.

Every write goes through `apply` (the children, in the decision's order) or `write_status`
(the object's status), and here the ownership rule is enforced, whatever the decision asks:
a child is replaced, patched, scaled or deleted only when this SpecDecodeDeployment controls it
(kubebuilder's `IsControlledBy`: a controller owner reference with its UID), a Pod's gate is
opened only down the chain SpecDecodeDeployment -> Deployment -> ReplicaSet -> Pod, and a
create that finds the name taken adopts nothing: the object of that name is used only when this
object controls it (a race with its own earlier write), otherwise the name is reported taken.

A failed write (a `ClusterError`) stops the rest of its part (warmup or serving) until the
next sync, and no garbage is collected after it. A create that finds its name taken stops the
rest of its part in this apply (the warmup Job is not created to mount ConfigMaps someone else
made under the names it mounts); the sync decides again, knowing the name is taken.
The answers go back to the sync as `Applied`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import cast

from warmgate.api import Manifest
from warmgate.kube.cluster import Cluster, ClusterError, Events, Logger, ReadKind
from warmgate.reconcile.sync.actions import (
    Action,
    Create,
    Delete,
    Event,
    OpenGate,
    Patch,
    Replace,
    Scale,
    described,
    target_of,
)
from warmgate.reconcile.sync.observed import Applied, Part, controlled_by, name_of, uid_of


@dataclass
class _Round:
    """What one apply did so far."""

    owner: str
    stored: list[Manifest] = field(default_factory=list)
    deleted: list[tuple[str, str]] = field(default_factory=list)
    taken: dict[tuple[str, str], str] = field(default_factory=dict)
    failed: dict[Part, str] = field(default_factory=dict)
    blocked: set[Part] = field(default_factory=set)
    errors: list[ClusterError] = field(default_factory=list)
    created: list[Manifest] = field(default_factory=list)
    done: list[Event] = field(default_factory=list)
    again: bool = False


def apply(
    actions: Sequence[Action], cluster: Cluster, events: Events, owner: str, log: Logger
) -> Applied:
    """Perform the actions in order, as this object (UID ``owner``) may; the server's answers."""
    state = _Round(owner)
    for action in actions:
        if action.stage in state.failed or action.stage in state.blocked:
            continue
        if action.stage == "collect" and (state.failed or state.blocked):
            continue
        target = target_of(action)
        if not _allowed(action, target, owner):
            message = f"Refused to write {described(action)}: not controlled by this object"
            log.error(message)
            state.taken[(_kind(action, target), name_of(target))] = (
                "not controlled by this SpecDecodeDeployment"
            )
            state.again = True
            continue
        try:
            _one(action, target, cluster, state)
        except ClusterError as exc:
            message = f"Could not write {described(action)}, retrying: {_line(exc)}"
            log.error(message)
            state.failed[action.stage] = message
            state.errors.append(exc)
            state.again = True
    if state.created:
        names = ", ".join(f"{m['kind']} {name_of(m)}" for m in state.created)
        events.post("Normal", "Created", f"Created {names}")
    for event in state.done:
        events.post(event.type, event.reason, event.message)
    return Applied(
        stored=tuple(state.stored),
        deleted=tuple(state.deleted),
        taken=dict(state.taken),
        failed=dict(state.failed),
        errors=tuple(state.errors),
        again=state.again,
    )


def _kind(action: Action, target: Manifest) -> str:
    return str(target.get("kind") or getattr(action, "kind", "Pod"))


def _allowed(action: Action, target: Manifest, owner: str) -> bool:
    """The ownership rule: what this object may write to (``target``: `target_of`)."""
    if isinstance(action, OpenGate):
        return (
            controlled_by(action.deployment, owner)
            and controlled_by(action.replica_set, uid_of(action.deployment))
            and controlled_by(action.pod, uid_of(action.replica_set))
        )
    # a create's manifest names this object as its controller; any other write, its target
    return controlled_by(target, owner)


def _one(action: Action, target: Manifest, cluster: Cluster, state: _Round) -> None:
    """One write (to ``target``: `target_of`) and what its answer changes."""
    if isinstance(action, Create):
        _create(action, cluster, state)
        return
    meta = target["metadata"]
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    if isinstance(action, Replace):
        stored = cluster.replace(action.manifest)
        if stored is None:  # a newer write won: read it again, decide again
            stored = cluster.read(cast(ReadKind, _kind(action, target)), namespace, name)
        elif action.done is not None:
            state.done.append(action.done)
        if stored is not None:
            state.stored.append(stored)
        state.again = True
    elif isinstance(action, Patch):
        patched = cluster.patch(action.kind, namespace, name, action.body)
        if patched is not None:
            state.stored.append(patched)
            if action.done is not None:
                state.done.append(action.done)
    elif isinstance(action, Delete):
        if cluster.delete(action.kind, namespace, name, uid_of(action.target)):
            state.deleted.append((action.kind, name))
            if action.done is not None:
                state.done.append(action.done)
    elif isinstance(action, Scale):
        cluster.scale(namespace, name, action.replicas)
        scaled = cluster.read("Deployment", namespace, name)
        if scaled is not None:
            state.stored.append(scaled)
        state.again = True
    else:
        gated = cluster.set_pod_condition(namespace, name, action.condition)
        if gated is not None:
            state.stored.append(gated)


def _create(action: Create, cluster: Cluster, state: _Round) -> None:
    """Create; on a taken name, use the object only when this object controls it."""
    manifest = action.manifest
    created = cluster.create(manifest)
    state.again = True
    if created is not None:
        state.stored.append(created)
        state.created.append(manifest)
        if action.done is not None:
            state.done.append(action.done)
        return
    kind, meta = str(manifest["kind"]), manifest["metadata"]
    found = cluster.read(cast(ReadKind, kind), meta["namespace"], meta["name"])
    if found is None:
        return  # deleted meanwhile: the next decision creates it again
    if controlled_by(found, state.owner):
        state.stored.append(found)
    else:
        state.taken[(kind, meta["name"])] = _holder(found)
        state.blocked.add(action.stage)


def _holder(obj: Manifest) -> str:
    """Who controls an object, in words, for the NotOwned message."""
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    ref = next((r for r in refs if r.get("controller") is True), None)
    if ref is None:
        return "not controlled by this SpecDecodeDeployment (no controller)"
    return (
        f"controlled by {ref.get('kind', '?')} {ref.get('name', '?')} "
        f"(uid {ref.get('uid', '?')}), not by this SpecDecodeDeployment"
    )


def write_status(
    cluster: Cluster, namespace: str, name: str, body: Manifest, at: StatusVersion | None = None
) -> ClusterError | None:
    """Merge-patch the object's status at the version the sync read (or its own last write
    left, `StatusVersion`): a status computed from an older object never overwrites a newer
    one (409 instead). The error when it failed (404: the object is gone)."""
    at = at or StatusVersion()
    try:
        written = cluster.patch_status(namespace, name, body, at.current)
    except ClusterError as exc:
        return exc
    at.wrote(written)
    return None


@dataclass
class StatusVersion:
    """The resourceVersion the sync's status writes are preconditioned on: the object's as the
    sync read it, then each write's answer; and the versions those writes replaced (issue 23
    item 9)."""

    current: str | None = None
    replaced: set[str] = field(default_factory=set)

    def wrote(self, version: str | None) -> None:
        if self.current is not None and version is not None:
            self.replaced.add(self.current)
            self.current = version


def _line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:512]
