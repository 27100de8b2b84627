"""What one sync saw: a frozen snapshot of the object's children, Pods, Events and runner reports.

`warmgate.runtime.gather` reads it through the cluster adapter; `decide` reads nothing else.
After the apply wrote, `after` folds the server's answers in (a created Job, a replaced
Deployment, a name another object holds), so the sync can decide again without reading again:
the snapshot is what the operator knows, not a cache of the cluster.

Nothing is trusted for being here. Jobs and ConfigMaps are listed by label, and labels are
anyone's to set: `decide` uses only what this object controls (`controlled_by`), and the apply
checks it again before it writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from warmgate.api import Manifest
from warmgate.contract.board import RunnerBoard
from warmgate.contract.order import CacheUsers
from warmgate.reconcile.sync.shard_cards import FreeCards

# The parts of a sync that can fail on their own: a failed read or write of one keeps what the
# status said about it, and no garbage is collected after any failure.
Part = Literal["warmup", "serving", "drift", "collect"]
EMPTY: Mapping[str, Any] = {}


def controlled_by(obj: Manifest, uid: str) -> bool:
    """The object's controller owner reference points at ``uid`` (kubebuilder's
    `IsControlledBy`): the only proof that an object is a child of that owner."""
    if not uid:
        return False
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(ref.get("controller") is True and ref.get("uid") == uid for ref in refs)


def uid_of(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def name_of(obj: Manifest) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


@dataclass(frozen=True)
class Observed:
    """The children as one sync found them (each field as the adapter answered it).

    ``jobs``: the object's warmup Jobs (by label, any controller). ``job_pods`` and
    ``job_events``: the Pods (by the Job controller's controller-uid label) and Events of the
    Jobs of the current plan, by Job UID; a Job absent there was not read this sync.
    ``configmaps`` is None when the sync did not list them (no garbage to collect yet);
    ``claims``, the recipe-cache claims labelled as this object's (any controller), likewise.
    ``cache_users``: who uses recipe-cache entries in the namespace, read before a warmup Job
    of a new cache key is made (its runner prunes the entries of objects that are gone).
    ``runner_docs``: the status documents of the runners in the Pods, by Pod UID.
    ``taken``: (kind, name) -> what holds a name the operator wanted: an object of that name
    that this SpecDecodeDeployment does not control. ``failed``: part -> what failed.
    """

    at: datetime
    claim: Manifest | None = None
    jobs: tuple[Manifest, ...] = ()
    job_pods: Mapping[str, tuple[Manifest, ...]] = field(default_factory=dict)
    job_events: Mapping[str, tuple[Manifest, ...]] = field(default_factory=dict)
    deployment: Manifest | None = None
    service: Manifest | None = None
    serving_pods: tuple[Manifest, ...] = ()
    replica_sets: tuple[Manifest, ...] = ()
    configmaps: tuple[Manifest, ...] | None = None
    claims: tuple[Manifest, ...] | None = None
    cache_users: CacheUsers | None = None
    # Read before a sharded warmup's Job is made (issue 38): the free Gaudi cards per node
    # (None: the read failed); ``cards_read`` says whether they were read this sync at all.
    free_cards: FreeCards | None = None
    cards_read: bool = False
    runner_docs: Mapping[str, RunnerBoard] = field(default_factory=dict)
    taken: Mapping[tuple[str, str], str] = field(default_factory=dict)
    failed: Mapping[Part, str] = field(default_factory=dict)

    def pods_of(self, job: Manifest) -> tuple[Manifest, ...]:
        return self.job_pods.get(uid_of(job), ())

    def events_of(self, job: Manifest) -> tuple[Manifest, ...]:
        return self.job_events.get(uid_of(job), ())

    def doc_of(self, pod: Manifest) -> RunnerBoard | None:
        return self.runner_docs.get(uid_of(pod))

    def after(self, applied: Applied) -> Observed:
        """The snapshot with the apply's answers folded in."""
        seen = self
        for obj in applied.stored:
            seen = seen._stored(obj)
        for kind, name in applied.deleted:
            seen = seen._deleted(kind, name)
        taken = {**self.taken, **applied.taken}
        failed = {**self.failed, **applied.failed}
        return replace(seen, taken=taken, failed=failed)

    def _stored(self, obj: Manifest) -> Observed:
        """An object as the server stored it after a write (created, replaced, patched)."""
        kind, name = obj.get("kind"), name_of(obj)
        if kind == "PersistentVolumeClaim":
            return replace(self, claim=obj)
        if kind == "Deployment":
            return replace(self, deployment=obj)
        if kind == "Service":
            return replace(self, service=obj)
        if kind == "Pod":
            pods = tuple(obj if name_of(p) == name else p for p in self.serving_pods)
            return replace(self, serving_pods=pods)
        if kind == "Job":
            others = tuple(j for j in self.jobs if name_of(j) != name)
            by_job = dict(self.job_pods)
            by_job.setdefault(uid_of(obj), ())  # a Job just created has no Pods yet
            return replace(self, jobs=(*others, obj), job_pods=by_job)
        if kind == "ConfigMap" and self.configmaps is not None:
            others = tuple(c for c in self.configmaps if name_of(c) != name)
            return replace(self, configmaps=(*others, obj))
        return self

    def _deleted(self, kind: str, name: str) -> Observed:
        if kind == "Job":
            return replace(self, jobs=tuple(j for j in self.jobs if name_of(j) != name))
        if kind == "ConfigMap" and self.configmaps is not None:
            kept = tuple(c for c in self.configmaps if name_of(c) != name)
            return replace(self, configmaps=kept)
        if kind == "PersistentVolumeClaim" and self.claims is not None:
            return replace(self, claims=tuple(c for c in self.claims if name_of(c) != name))
        return self


@dataclass(frozen=True)
class Controlled:
    """What of one snapshot the object controls (`controlled_by`), sorted out once a decision
    (`controlled`): whether the claim, the Deployment and the Service read are its own; its
    Jobs, ConfigMaps and claims, as listed; and the (kind, name) of the listed Jobs and
    ConfigMaps that it does not control (anyone may label an object as its child)."""

    claim: bool = False
    deployment: bool = False
    service: bool = False
    jobs: tuple[Manifest, ...] = ()
    configmaps: tuple[Manifest, ...] = ()
    claims: tuple[Manifest, ...] = ()
    foreign: frozenset[tuple[str, str]] = frozenset()


def controlled(seen: Observed, uid: str) -> Controlled:
    """What of ``seen`` the object ``uid`` controls (`Controlled`)."""

    def ours(obj: Manifest | None) -> bool:
        return obj is not None and controlled_by(obj, uid)

    listed = [("Job", j) for j in seen.jobs] + [("ConfigMap", c) for c in seen.configmaps or ()]
    return Controlled(
        claim=ours(seen.claim),
        deployment=ours(seen.deployment),
        service=ours(seen.service),
        jobs=tuple(j for j in seen.jobs if ours(j)),
        configmaps=tuple(c for c in seen.configmaps or () if ours(c)),
        claims=tuple(c for c in seen.claims or () if ours(c)),
        foreign=frozenset((kind, name_of(obj)) for kind, obj in listed if not ours(obj)),
    )


@dataclass(frozen=True)
class Applied:
    """What an apply did, as the server answered: the objects it stored (created, replaced,
    patched), the (kind, name) it deleted, names another object holds, parts that failed;
    ``again``: the sync must decide again on the new snapshot (a write whose answer a decision
    needs: a created claim's UID, a created Job, a replaced Deployment, a failure)."""

    stored: tuple[Manifest, ...] = ()
    deleted: tuple[tuple[str, str], ...] = ()
    taken: Mapping[tuple[str, str], str] = field(default_factory=dict)
    failed: Mapping[Part, str] = field(default_factory=dict)
    # The failed writes' errors (ClusterError), for the retry backoff.
    errors: tuple[Any, ...] = ()
    again: bool = False
