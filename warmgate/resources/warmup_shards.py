"""A sharded warmup's plan files and Job shape (issue 38; docs/operator.md, "Sharded warmup").

With ``spec.warmup.shards`` N > 1 (capped at what the plan allows, `buckets.shard.max_shards`)
the warmup Job is an Indexed Job of N completions run side by side. Its plan ConfigMap holds
plan.json, the whole plan with ``shard`` role ``merge``, and ``shard-<i>.json`` per slice: the
same plan but for the slice's seed file, expected lists and drafter shapes, no drafter sweep
(the merge runs it), its own cache key (``shard_key``) with no pruning, and ``shard`` role
``slice``. Pod i runs ``python3 -m warmgate.warmup --shards /etc/warmgate``: slice i, and in Pod
0 then the merge and the whole plan on the merged recipes (docs/runner.md, "Sharded warmup").

Pure: spec, plan and the runner's own types in, documents out. N = 1 builds nothing here, so
every unsharded plan.json and Job keeps its text and its name.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.workload import AUTO, MAX_SHARDS
from warmgate.buckets import BucketPlan
from warmgate.buckets.shard import PlanSlice, ShardedPlan, max_shards, slice_plan
from warmgate.contract.order import BucketSpec, ListExpectation, WarmupOrder, bucket_digest
from warmgate.contract.shardspec import INDEX_ENV, ShardSpec, shard_file, shard_key
from warmgate.contract.sweepplan import HookSpec
from warmgate.resources.pod import cache_claim_name

__all__ = [
    "SHARD_COMMAND_FLAG",
    "ShardedWarmup",
    "indexed_job_fields",
    "planned_shards",
    "shard_cap",
    "sharded_warmup",
]

# The runner's option for a sharded warmup's Pods (warmgate/warmup/__main__.py).
SHARD_COMMAND_FLAG: Final = "--shards"
# The label the Job controller puts on every Pod of a Job (batch/v1): the shards' affinity term.
JOB_NAME_LABEL: Final = "batch.kubernetes.io/job-name"
# The weight of the preference for one node (1..100): shards share the host's CPUs for the graph
# compiler and write local recipe directories; a node short of cards still takes fewer of them.
AFFINITY_WEIGHT: Final = 100


def shard_cap(sdd: SpecDecodeDeployment, plan: BucketPlan) -> int:
    """The most shards this spec and plan may run, whatever the cards: what is asked (auto: 8)
    capped at the plan's maximum (a prompt bucket and a decode seed each); 1 without a
    recipe-cache claim (the slices publish their recipes there for Pod 0's merge: in emptyDirs
    they could not share them)."""
    shards = sdd.spec.warmup.shards
    wanted = MAX_SHARDS if shards == AUTO else int(shards)
    if wanted <= 1 or cache_claim_name(sdd) is None:
        return 1
    return max(1, min(wanted, max_shards(plan)))


def planned_shards(sdd: SpecDecodeDeployment, plan: BucketPlan, decided: int | None = None) -> int:
    """The Job's shard count: the sync's decision from the free cards (``decided``,
    `reconcile.sync.shard_cards`) within `shard_cap`; without one (`warmgate plan`, a verified plan
    whose Job is gone), an explicit count capped, and 1 for auto."""
    cap = shard_cap(sdd, plan)
    if decided is not None:
        return max(1, min(decided, cap))
    return 1 if sdd.spec.warmup.shards == AUTO else cap


class ShardedWarmup:
    """The slices of one plan and the runner documents that warm them."""

    def __init__(self, sharded: ShardedPlan, merge: WarmupOrder, slices: list[WarmupOrder]):
        self.sharded = sharded
        self.merge = merge
        self.slices = slices

    @property
    def count(self) -> int:
        """Shards (Pods, engine processes)."""
        return len(self.slices)

    def files(self) -> dict[str, Manifest]:
        """``shard-<i>.json`` documents by file name (plan.json is the merge: the caller's)."""
        return {shard_file(i): order.to_json() for i, order in enumerate(self.slices)}


@lru_cache(maxsize=64)
def _sliced(
    plan: BucketPlan, shards: int, drafter: tuple[tuple[str, int, int, int], ...]
) -> ShardedPlan:
    # BucketPlan hashes by identity: a planning result's plan is one object for every sync that
    # shares it (PlanningCache), so the slicing (20-60 ms on the examples) runs once per plan.
    return slice_plan(plan, shards, drafter=drafter)


def sharded_warmup(order: WarmupOrder, plan: BucketPlan, shards: int) -> ShardedWarmup:
    """The merge document (``order`` with its ``shard`` section) and one document per slice.

    The slicing weighs graphs with the cost model's 8B reference: a model's size scales every
    target graph alike, so it changes the estimate, hardly the split."""
    direct = order.drafter_warmup
    drafter = direct.shapes if direct is not None else ()
    sharded = _sliced(plan, shards, tuple(drafter))
    wait = order.timeouts.total_s  # the slices started with Pod 0 and have its deadline
    merge = replace(order, shard=ShardSpec("merge", 0, shards, wait_s=wait))
    slices = [_slice_order(order, plan, part, shards) for part in sharded.slices]
    return ShardedWarmup(sharded, merge, slices)


def _slice_order(order: WarmupOrder, plan: BucketPlan, part: PlanSlice, shards: int) -> WarmupOrder:
    sliced = part.bucket_plan(plan)
    lists = {
        "prompt": sliced.prompt_buckets,
        "seed_decode": sliced.seed_decode_buckets,
        "decode": sliced.decode_buckets,
    }
    expected = {n: ListExpectation(len(rows), bucket_digest(rows)) for n, rows in lists.items()}
    direct = order.drafter_warmup
    shapes = part.drafter
    drafter_warmup = replace(direct, shapes=shapes) if direct is not None and shapes else None
    hook = order.drafter_hook
    return replace(
        order,
        plan_id=f"{order.plan_id}-shard-{part.index}-of-{shards}",
        buckets=BucketSpec(
            seed_file_text=part.bucket_file(plan, shards),
            expected=expected,
            abort_on_mismatch=order.buckets.abort_on_mismatch,
            known_unwarmable=order.buckets.known_unwarmable,
        ),
        # Its own entry, merged by Pod 0 and deleted after the merge is published; a slice
        # prunes nothing (the merge does, once).
        cache=replace(
            order.cache,
            key=shard_key(order.cache.key, part.index, shards),
            retain=0,
            users=None,
        ),
        drafter_sweep=None,
        # The hook only carries the slice's direct drafter warmup into the engine; the drafter's
        # evidence is the merge's (the whole plan's sweep, direct warmup and probe).
        drafter_hook=HookSpec(enabled=hook.enabled and drafter_warmup is not None),
        drafter_warmup=drafter_warmup if hook.enabled else None,
        shard=ShardSpec("slice", part.index, shards),
    )


def indexed_job_fields(shards: int) -> Manifest:
    """The Job spec fields of N shards: one Pod per index, all at once."""
    return {"completionMode": "Indexed", "completions": shards, "parallelism": shards}


def one_node_affinity(pod_spec: Manifest, job_name: str) -> None:
    """Prefer the node the Job's other Pods run on (added to the user's affinity, if any)."""
    term = {
        "weight": AFFINITY_WEIGHT,
        "podAffinityTerm": {
            "labelSelector": {"matchLabels": {JOB_NAME_LABEL: job_name}},
            "topologyKey": "kubernetes.io/hostname",
        },
    }
    affinity = dict(pod_spec.get("affinity") or {})
    pod_affinity = dict(affinity.get("podAffinity") or {})
    preferred = list(pod_affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or [])
    pod_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [*preferred, term]
    affinity["podAffinity"] = pod_affinity
    pod_spec["affinity"] = affinity


__all__ += ["INDEX_ENV", "one_node_affinity"]
