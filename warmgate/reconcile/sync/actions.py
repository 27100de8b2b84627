"""What a sync decides to write, as data: typed actions on the children, Events, the status.

`decide` returns a `Decision`; `warmgate.runtime.apply` performs it, and is the one place that
writes to the cluster. Every action names the object it acts on as the sync observed it
(``target``), so the apply can check, before it writes, that this SpecDecodeDeployment
controls that object: nothing the operator did not create is ever patched, replaced, scaled,
gated or deleted (docs/operator.md, "Trust and failure model").

Each action belongs to a stage of the sync (`Stage`): when one write of a stage fails, the rest
of that stage waits for the next sync, and no garbage is collected after a failed write.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from warmgate.api import Manifest, SpecDecodeDeploymentStatus

Stage = Literal["warmup", "serving", "collect"]
EventType = Literal["Normal", "Warning"]
# What the sync may delete (superseded warmups, a recipe-cache claim nothing mounts any more)
# and patch (a stopped Job, a drifted Service).
DeleteKind = Literal["Job", "ConfigMap", "PersistentVolumeClaim"]
PatchKind = Literal["Job", "Service"]


@dataclass(frozen=True)
class Event:
    """One Kubernetes Event on the SpecDecodeDeployment; ``log``: a line for the operator's
    log too (at INFO for a Normal Event, WARNING for a Warning)."""

    type: EventType
    reason: str
    message: str
    log: str | None = None


@dataclass(frozen=True)
class Create:
    """Create a child (its manifest carries this object's controller reference). The apply
    posts one `Created` Event per round, naming every child it created."""

    stage: Stage
    manifest: Manifest
    done: Event | None = None


@dataclass(frozen=True)
class Replace:
    """Replace a Deployment or the served record at the resourceVersion of ``target``; ``done``
    is posted once the server took it (a lost race is no error: the next sync reads again)."""

    stage: Stage
    manifest: Manifest
    target: Manifest
    done: Event | None = None


@dataclass(frozen=True)
class Patch:
    """A JSON merge patch of ``target``; ``done`` is posted when the server took it."""

    stage: Stage
    kind: PatchKind
    target: Manifest
    body: Manifest
    done: Event | None = None


@dataclass(frozen=True)
class Delete:
    """Delete exactly ``target`` (its UID is the precondition); ``done`` once deleted."""

    stage: Stage
    kind: DeleteKind
    target: Manifest
    done: Event | None = None


@dataclass(frozen=True)
class Scale:
    """Set the replicas of ``target`` (a Deployment) through its scale subresource."""

    stage: Stage
    target: Manifest
    replicas: int


@dataclass(frozen=True)
class OpenGate:
    """Set a readiness-gate condition on ``pod``, which ``replica_set`` controls, which
    ``deployment`` controls: the apply checks that whole chain down from this object."""

    stage: Stage
    pod: Manifest
    replica_set: Manifest
    deployment: Manifest
    condition: Manifest


Action = Create | Replace | Patch | Delete | Scale | OpenGate


def target_of(action: Action) -> Manifest:
    """The object an action writes to (for a create, the manifest it sends)."""
    if isinstance(action, Create):
        return action.manifest
    if isinstance(action, OpenGate):
        return action.pod
    return action.target


def described(action: Action) -> str:
    """'Job llm/x-warmup-1234': what the action writes to, for logs and messages."""
    obj = target_of(action)
    kind = (
        obj.get("kind")
        or (action.manifest.get("kind") if isinstance(action, Replace) else None)
        or getattr(action, "kind", "Pod" if isinstance(action, OpenGate) else "")
    )
    meta = obj.get("metadata") or {}
    return f"{kind} {meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass(frozen=True)
class Decision:
    """One decision: the writes to the children, and what the sync then reports.

    ``actions`` are applied in order. ``status`` is the whole new status; ``events`` are the
    Events the verdicts call for (the plan or coverage changed, unwarmed shapes were seen), sent
    once per sync, after the writes.
    """

    actions: tuple[Action, ...]
    status: SpecDecodeDeploymentStatus
    events: tuple[Event, ...] = ()
