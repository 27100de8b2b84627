"""Gather what one sync decides on: the object's children, Pods, Events and runner reports.

Every read of a sync is here, each sent once, in one pass, before anything is decided: the
recipe-cache claim (or an earlier build's, `_claim`), the warmup Jobs, the Pods and Events of
the current plan's Jobs (unless the status already records this plan as verified), who uses
the claim's entries (before the first Job of a key, `cache_users`), the serving Deployment, its
Service, Pods and ReplicaSets (only when a Pod waits for its gate), the ConfigMaps and the
object's cache claims (once there can be garbage; the claims only where an old one can be), and
the runners' status documents (the running warmup Pod, the serving Pods of the served plan).
What to read is not decided here: after each part, `warmgate.reconcile.sync.reads` says what to read
next, a pure function of the object and of the snapshot so far. A failed read marks its part
failed in the snapshot: the decision keeps what the status said
about that part, and collects no garbage.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from time import monotonic
from typing import Final, Protocol

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.constants import (
    ANNOTATION_CACHE_KEY,
    COMPONENT_SERVING,
    COMPONENT_WARMUP,
    LABEL_COMPONENT,
    LABEL_NAME,
)
from warmgate.contract.board import RunnerBoard
from warmgate.contract.order import CacheUsers
from warmgate.kube.cluster import CONTROLLER_UID_LABEL, Cluster, ClusterError, Logger
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.sync.observed import Observed, Part, uid_of
from warmgate.reconcile.sync.reads import Reads, job_reads, reads
from warmgate.reconcile.sync.shard_cards import FreeCards, free_cards
from warmgate.resources import serving_name, serving_selector
from warmgate.resources.names import COMPONENT_CACHE, label_value, parent_name

# Reading the serving Pods' runners shares one budget per sync: a namespace whose
# NetworkPolicy drops the status port costs at most this long per resync, not 2 s per replica.
READ_BUDGET_S: Final = 5.0


class RunnerEndpoints(Protocol):
    """Reads the status document a runner serves in a Pod (warmup or serve mode)."""

    def read(self, pod: Manifest) -> RunnerBoard | None:
        """The runner's board, or None when the Pod has no reachable runner endpoint; a
        ValueError when it answers something else."""


class NoEndpoints:
    """No runner endpoint reachable (unit tests of other parts, or observation turned off)."""

    def read(self, pod: Manifest) -> RunnerBoard | None:
        del pod
        return None


def selector(sdd: SpecDecodeDeployment, component: str | None = None) -> str:
    """The label selector of this object's children (of one component)."""
    name = f"{LABEL_NAME}={label_value(parent_name(sdd))}"
    return name if component is None else f"{name},{LABEL_COMPONENT}={component}"


class Gatherer:
    """One sync's reads, and the parts whose reads failed."""

    def __init__(self, cluster: Cluster, endpoints: RunnerEndpoints, log: Logger) -> None:
        self.cluster, self.endpoints, self.log = cluster, endpoints, log
        self.failed: dict[Part, str] = {}
        self.errors: list[ClusterError] = []

    def doc(self, pod: Manifest) -> RunnerBoard | None:
        """A runner's status board; what is no runner's board is a warning about its Pod,
        never a failed sync (issue 23 item 4)."""
        try:
            return self.endpoints.read(pod)
        except Exception as exc:  # whatever a Pod answers is no failed sync
            name = (pod.get("metadata") or {}).get("name")
            why = " ".join(str(exc).split())[:200]
            why = why if isinstance(exc, ValueError) else f"{type(exc).__name__} {why}".strip()
            self.log.warning(f"Ignored the runner status of Pod {name}: {why}")
            return None

    def one(self, part: Part, what: str, call: Callable[[], Manifest | None]) -> Manifest | None:
        """One object (None: absent, or its part failed)."""
        found = self._read(part, what, lambda: [call()])
        return found[0] if found else None

    def many(self, part: Part, what: str, call: Callable[[], list[Manifest]]) -> list[Manifest]:
        """A list of objects (empty when its part failed)."""
        return [m for m in self._read(part, what, lambda: list(call())) if m is not None]

    def _read(
        self, part: Part, what: str, call: Callable[[], Sequence[Manifest | None]]
    ) -> Sequence[Manifest | None]:
        """One read; a ClusterError marks ``part`` failed (and the reads of it that follow)."""
        if part in self.failed:
            return []
        try:
            return call()
        except ClusterError as exc:
            self.errors.append(exc)
            message = f"Could not read {what}, retrying: {' '.join(str(exc).split())[:512]}"
            self.log.error(message)
            self.failed[part] = message
            return []


@dataclass(frozen=True)
class _Reading:
    """One sync's reading: the object, its planning result, the gatherer, the namespace."""

    sdd: SpecDecodeDeployment
    result: PlanningResult | None
    gatherer: Gatherer
    namespace: str

    def next(self, seen: Observed) -> Reads:
        """What to read after ``seen`` (`reconcile.reads`)."""
        return reads(self.sdd, self.result, seen)


def gather(
    sdd: SpecDecodeDeployment,
    result: PlanningResult | None,
    cluster: Cluster,
    *,
    endpoints: RunnerEndpoints,
    log: Logger,
    at: datetime,
) -> tuple[Observed, list[ClusterError]]:
    """The snapshot one decision needs, and the read errors (for the retry backoff): each part
    reads what `reconcile.reads` says of the snapshot so far (``result`` None: a spec this
    operator cannot read, whose served plan alone is read)."""
    gatherer = Gatherer(cluster, endpoints, log)
    reading = _Reading(sdd, result, gatherer, sdd.metadata.namespace or "default")
    seen = Observed(at=at)
    if reading.next(seen).warmup:
        seen = _warmup(reading, seen)
    seen = _serving(reading, seen)
    seen = replace(seen, failed=dict(gatherer.failed))
    if reading.next(seen).garbage:
        seen = _garbage(reading, seen)
    record = reading.next(seen).served_record
    if record is not None:
        what, namespace = f"the served record {record}", reading.namespace
        found = gatherer.one("serving", what, lambda: cluster.read("ConfigMap", namespace, record))
        seen = replace(seen, configmaps=(found,) if found else ())
    return replace(seen, failed=dict(gatherer.failed)), gatherer.errors


def _garbage(reading: _Reading, seen: Observed) -> Observed:
    """The ConfigMaps and recipe-cache claims labelled as this object's, for the collection
    (the claims only when there can be an old one)."""
    sdd, gatherer, namespace = reading.sdd, reading.gatherer, reading.namespace
    cluster = gatherer.cluster
    configmaps = gatherer.many(
        "collect",
        "the ConfigMaps",
        lambda: cluster.list_objects("ConfigMap", namespace, selector(sdd)),
    )
    claims: list[Manifest] | None = None
    if reading.next(seen).claims:
        claims = gatherer.many(
            "collect",
            "the recipe-cache claims",
            lambda: cluster.list_objects(
                "PersistentVolumeClaim", namespace, selector(sdd, COMPONENT_CACHE)
            ),
        )
    if "collect" in gatherer.failed:
        return seen
    listed = None if claims is None else tuple(claims)
    return replace(seen, configmaps=tuple(configmaps), claims=listed)


def _warmup(reading: _Reading, seen: Observed) -> Observed:
    """The claim, the warmup Jobs, and the Pods and Events of the current plan's Jobs."""
    sdd, gatherer, namespace = reading.sdd, reading.gatherer, reading.namespace
    cluster = gatherer.cluster
    name = reading.next(seen).claim
    if name is not None:
        seen = replace(seen, claim=_claim(reading, seen, name))
    jobs = gatherer.many(
        "warmup",
        "the warmup Jobs",
        lambda: cluster.list_objects("Job", namespace, selector(sdd, COMPONENT_WARMUP)),
    )
    seen = replace(seen, jobs=tuple(jobs))
    if reading.next(seen).cache_users:
        seen = replace(seen, cache_users=cache_users(gatherer, namespace, seen.at))
    if reading.next(seen).free_cards:
        seen = replace(seen, free_cards=free_cards_of(gatherer, sdd), cards_read=True)
    pods: dict[str, tuple[Manifest, ...]] = {}
    events: dict[str, tuple[Manifest, ...]] = {}
    docs: dict[str, RunnerBoard] = {}
    for job in reading.next(seen).jobs:
        _job(gatherer, job, namespace, (pods, events, docs))
    return replace(seen, job_pods=pods, job_events=events, runner_docs=docs)


def _claim(reading: _Reading, seen: Observed, name: str) -> Manifest | None:
    """The recipe-cache claim of the spec's name; without one, the claim an earlier build made
    when `reconcile.reads` says to read it and it is still this object's."""
    cluster, namespace = reading.gatherer.cluster, reading.namespace
    what = f"the recipe-cache claim {name}"
    claim = reading.gatherer.one(
        "warmup", what, lambda: cluster.read("PersistentVolumeClaim", namespace, name)
    )
    todo = reading.next(replace(seen, claim=claim))
    legacy = todo.legacy_claim
    if legacy is None:
        return claim
    what = f"the recipe-cache claim {legacy}"
    found = reading.gatherer.one(
        "warmup", what, lambda: cluster.read("PersistentVolumeClaim", namespace, legacy)
    )
    return found if found is not None and todo.adopted(found) else None


def cache_users(gatherer: Gatherer, namespace: str, at: datetime) -> CacheUsers | None:
    """Who uses recipe-cache entries in the namespace, read before the first Job of a cache key
    is made (its runner prunes the entries of objects that are gone): every
    SpecDecodeDeployment's UID and status.warmup.cacheKey, and the cache key of every serving
    Deployment labelled as warmgate's. A label only adds keys to keep, so a forged one can keep
    an entry, never remove one; one that cannot name an entry is dropped (`CacheUsers.listed`:
    the runner refuses a plan that carries it). A failed read leaves the prune out (None), not
    the warmup."""
    cluster = gatherer.cluster
    try:
        objects = cluster.list_objects("SpecDecodeDeployment", namespace, "")
        serving = f"{LABEL_COMPONENT}={COMPONENT_SERVING}"
        deployments = cluster.list_objects("Deployment", namespace, serving)
    except ClusterError as exc:
        gatherer.log.warning(f"Could not read who uses the recipe cache, no prune: {exc}")
        return None
    keys = [((o.get("status") or {}).get("warmup") or {}).get("cacheKey") for o in objects]
    keys += [key for d in deployments for key in _deployment_keys(d)]
    return CacheUsers.listed((uid_of(o) for o in objects), keys, int(at.timestamp()))


# The Pods that may hold cards: those not ended (the apiserver filters them).
HOLDING: Final = "status.phase!=Succeeded,status.phase!=Failed"


def free_cards_of(gatherer: Gatherer, sdd: SpecDecodeDeployment) -> FreeCards | None:
    """The free Gaudi cards per node, read before a sharded warmup's Job is made (issue 38):
    every Node and the Pods of every namespace not ended. A failed read (e.g. an install whose
    RBAC does not grant them) leaves the count to the spec (`shard_cards.choose_shards`), not
    the warmup."""
    cluster = gatherer.cluster
    try:
        nodes = cluster.list_cluster("Node")
        pods = cluster.list_cluster("Pod", HOLDING)
    except ClusterError as exc:
        gatherer.log.warning(f"Could not read the free Gaudi cards (Nodes, Pods): {exc}")
        return None
    return free_cards(nodes, pods, sdd)


def _deployment_keys(deployment: Manifest) -> list[object]:
    """The cache keys a serving Deployment names: its own annotation and its Pods' template's."""
    template = (deployment.get("spec") or {}).get("template") or {}
    metas = (deployment.get("metadata") or {}, template.get("metadata") or {})
    return [(meta.get("annotations") or {}).get(ANNOTATION_CACHE_KEY) for meta in metas]


def _job(
    gatherer: Gatherer,
    job: Manifest,
    namespace: str,
    into: tuple[
        dict[str, tuple[Manifest, ...]], dict[str, tuple[Manifest, ...]], dict[str, RunnerBoard]
    ],
) -> None:
    """One Job's Pods, its runner's document while one runs, else its Events."""
    cluster, uid, name = gatherer.cluster, uid_of(job), job["metadata"]["name"]
    pods, events, docs = into
    label = f"{CONTROLLER_UID_LABEL}={uid}"
    what = f"the Pods of Job {name}"
    found = tuple(gatherer.many("warmup", what, lambda: cluster.list_pods(namespace, label)))
    pods[uid] = found
    running, read_events = job_reads(job, found)
    if running is not None:
        doc = gatherer.doc(running)
        if doc is not None:
            docs[uid_of(running)] = doc
    elif read_events:
        what = f"the Events of Job {name}"
        events[uid] = tuple(gatherer.many("warmup", what, lambda: cluster.events(namespace, uid)))


def _serving(reading: _Reading, seen: Observed) -> Observed:
    """The serving Deployment, its Service, Pods, the ReplicaSets a gate needs, the runners."""
    sdd, gatherer, namespace = reading.sdd, reading.gatherer, reading.namespace
    cluster, name = gatherer.cluster, serving_name(sdd)
    deployment = gatherer.one(
        "serving",
        f"the serving Deployment {name}",
        lambda: cluster.read("Deployment", namespace, name),
    )
    seen = replace(seen, deployment=deployment)
    part = reading.next(seen).serving_pods
    if part is None:
        return seen
    if deployment is not None:
        service = gatherer.one(
            "serving", f"the Service {name}", lambda: cluster.read("Service", namespace, name)
        )
        seen = replace(seen, service=service)
    pods = tuple(
        gatherer.many(
            part, "the serving Pods", lambda: cluster.list_pods(namespace, serving_selector(sdd))
        )
    )
    seen = replace(seen, serving_pods=pods)
    if reading.next(seen).replica_sets:
        sets = gatherer.many(
            "serving",
            "the serving ReplicaSets",
            lambda: cluster.list_objects("ReplicaSet", namespace, serving_selector(sdd)),
        )
        seen = replace(seen, replica_sets=tuple(sets))
    docs = _runner_docs(gatherer, reading.next(seen).runners)
    return replace(seen, runner_docs={**seen.runner_docs, **docs})


def _runner_docs(gatherer: Gatherer, pods: list[Manifest]) -> dict[str, RunnerBoard]:
    """The serve-mode documents of the serving runners to ask (one time budget)."""
    docs: dict[str, RunnerBoard] = {}
    deadline = monotonic() + READ_BUDGET_S
    for pod in pods:
        if monotonic() > deadline:
            break  # the rest next sync; the record keeps what was read before
        doc = gatherer.doc(pod)
        if doc is not None:
            docs[uid_of(pod)] = doc
    return docs
