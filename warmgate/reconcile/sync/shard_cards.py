"""How many shards a sharded warmup runs (issue 38): the free Gaudi cards, decided once per Job.

``spec.warmup.shards`` asks for N engine processes (an integer 1..8) or ``auto``. The count the
Job is made with is

    min(asked (auto: 8), what the plan allows, free cards on the best node // TP), at least 1

where a node's free cards are its ``habana.ai/gaudi`` allocatable minus what the Pods bound to it
and not ended request (every Pod's: the object's own serving Pods included, so a re-warm never
takes the cards its serving holds, and nothing is preempted). Only Nodes the warmup's Pods may
run on count: schedulable, Ready, matching ``spec.warmup.placement``'s nodeSelector and
tolerating its NoSchedule and NoExecute taints (its affinity is not read: a node it excludes
may be counted, and the shards then wait as an unsharded warmup would). An explicit N larger
than what fits on the best node falls back to what fits (at least 1), and says so (an Event),
instead of leaving shards Pending; with no such node at all (or the cards not readable: the
chart's ``gaudiCards`` off) it is used as asked, and auto is 1. The cards are read just before
the Job is made, and the count is kept with the Job
(its Pod template's annotation says what was asked: a change of the free cards never re-makes
it, a change of what is asked does). Pure: Nodes and Pods in, a count and a sentence out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.kube import GAUDI_RESOURCE, quantity_value
from warmgate.api.workload import AUTO
from warmgate.buckets import BucketPlan
from warmgate.resources.warmup_shards import shard_cap

__all__ = [
    "FreeCards",
    "ShardChoice",
    "asked",
    "choose_shards",
    "free_cards",
    "wants_cards",
]

# Pod phases that hold no cards any more.
ENDED: Final = frozenset({"Succeeded", "Failed"})
# Taint effects that keep a Pod off a node (PreferNoSchedule only prefers).
BLOCKING: Final = frozenset({"NoSchedule", "NoExecute"})


@dataclass(frozen=True)
class FreeCards:
    """Free ``habana.ai/gaudi`` cards per node the warmup may use, the most first."""

    nodes: tuple[tuple[str, int], ...] = ()

    @property
    def best(self) -> tuple[str, int] | None:
        """(node, free cards) of the node with the most, or None without a Gaudi node."""
        return self.nodes[0] if self.nodes else None


@dataclass(frozen=True)
class ShardChoice:
    """The shards the Job is made with, and why it is fewer than asked (None: as asked)."""

    count: int
    note: str | None = None
    # a Warning (an explicit count fell back), else Normal (what auto chose)
    warning: bool = False


def asked(sdd: SpecDecodeDeployment) -> str:
    """spec.warmup.shards as written: "auto" or the integer's digits."""
    return str(sdd.spec.warmup.shards)


def wants_cards(sdd: SpecDecodeDeployment, plan: BucketPlan) -> bool:
    """The count depends on the free cards (more than one shard may run)."""
    return shard_cap(sdd, plan) > 1


def choose_shards(sdd: SpecDecodeDeployment, cap: int, free: FreeCards | None) -> ShardChoice:
    """The shard count of a new Job, at most ``cap`` (`shard_cap`: what the spec and plan
    allow), from the free cards read for it (None: not known)."""
    if cap <= 1:
        return ShardChoice(1)
    auto = sdd.spec.warmup.shards == AUTO
    field = f"spec.warmup.shards {asked(sdd)}"
    best = free.best if free is not None else None
    if best is None:
        # Nothing to count: the cards could not be read, or no node the warmup may use has
        # any (yet: a node pool scaled to zero grows for Pending Pods). An explicit count is
        # used as asked (its shards wait, as an unsharded warmup does); auto warms in one.
        if not auto:
            return ShardChoice(cap)
        why = (
            f"the free {GAUDI_RESOURCE} cards could not be read"
            if free is None
            else f"no node the warmup may use has {GAUDI_RESOURCE} cards"
        )
        return ShardChoice(1, f"{field}: 1 shard, {why}", warning=True)
    tp = sdd.spec.engine.tensor_parallel_size
    node, cards = best
    count = max(1, min(cap, cards // tp))
    why = f"{cards} free {GAUDI_RESOURCE} cards on {node}, {tp} per shard"
    if auto:
        return ShardChoice(count, f"{field}: {count} of at most {cap} shards ({why})")
    if count < cap:
        note = f"{field}: {count} of {cap} shards, the most that fit ({why})"
        return ShardChoice(count, note, warning=True)
    return ShardChoice(count)


def free_cards(
    nodes: Iterable[Manifest], pods: Iterable[Manifest], sdd: SpecDecodeDeployment
) -> FreeCards:
    """Free cards on each node the warmup's Pods may run on, the most first (then by name)."""
    placement = sdd.spec.warmup.placement
    selector = dict(placement.node_selector or {}) if placement is not None else {}
    tolerations = [t.to_dict() for t in (placement.tolerations or [])] if placement else []
    held: dict[str, int] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if node and (pod.get("status") or {}).get("phase") not in ENDED:
            held[node] = held.get(node, 0) + pod_cards(pod)
    found = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        total = _allocatable(node)
        if not name or total is None or not _usable(node, selector, tolerations):
            continue
        found.append((name, max(0, total - held.get(name, 0))))
    return FreeCards(tuple(sorted(found, key=lambda item: (-item[1], item[0]))))


def pod_cards(pod: Manifest) -> int:
    """The cards a Pod holds: its containers' requests (or limits) summed, or its largest init
    container's when larger (as the scheduler counts them)."""
    spec = pod.get("spec") or {}
    main = sum(_cards(c) for c in spec.get("containers") or [])
    init = max((_cards(c) for c in spec.get("initContainers") or []), default=0)
    return max(main, init)


def _cards(container: Manifest) -> int:
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):  # an extended resource's request defaults to its limit
        value = (resources.get(part) or {}).get(GAUDI_RESOURCE)
        if value is not None:
            return _count(value) or 0
    return 0


def _count(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | str):
        return None
    try:
        return int(quantity_value(value))
    except ValueError:
        return None


def _allocatable(node: Manifest) -> int | None:
    value = ((node.get("status") or {}).get("allocatable") or {}).get(GAUDI_RESOURCE)
    return _count(value) if value is not None else None


def _usable(node: Manifest, selector: dict[str, str], tolerations: list[Manifest]) -> bool:
    """Schedulable, Ready, labelled as the nodeSelector asks, every blocking taint tolerated."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    if spec.get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    if not any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
        return False
    labels = meta.get("labels") or {}
    if any(labels.get(key) != value for key, value in selector.items()):
        return False
    return all(
        _tolerated(taint, tolerations)
        for taint in spec.get("taints") or []
        if taint.get("effect") in BLOCKING
    )


def _tolerated(taint: Manifest, tolerations: list[Manifest]) -> bool:
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        if toleration.get("operator") == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (toleration.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False
