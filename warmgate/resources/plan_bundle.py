"""What the children of one plan are built from besides the spec: the plan and its measurements."""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.buckets import BucketPlan
from warmgate.contract.drafterwarm import DrafterWarmupSpec
from warmgate.contract.order import CacheUsers
from warmgate.contract.sweepplan import SweepSpec


@dataclass(frozen=True)
class PlanBundle:
    """A bucket plan to warm and serve, with the figures its children need.

    ``estimated_warmup_s``: the planning stage's warmup estimate for this plan (the upper end,
    status.plan.estimatedWarmupSeconds); it sizes serving's startup probe.
    ``kv_blocks``: the KV block count this plan's verified warmup measured (the runner's
    summary, status.warmup.kvBlocks); serving pins it when the plan does not fix one.
    ``cache_claim_uid``: the UID of the recipe-cache claim the warmup publishes to (None
    without a claim, or before it exists); part of the warmup Job's content, so a replaced
    claim gets a new Job.
    ``drafter_sweep``: the warmup sweep of the drafter's graphs, as the runner reads it (format
    warmgate-drafter-sweep/1,
    docs/runner.md), None for methods without a draft model or nothing to drive.
    ``cache_users``: who uses the entries of the claim's namespace (None: not read this sync);
    written into plan.json for the runner's prune, but not part of the Job's content (the
    name), so a new object in the namespace never makes a new Job.
    ``cache_claim_name``: the claim the warmup and serving mount when it is not the template's
    own name: one an earlier build made under `<parent>-recipe-cache` from the same template
    (`cache_claim.made_from`), kept instead of a new, empty claim. None: the spec's name.
    ``known_unwarmable``: the reachable target shapes no bucket the engine's warmup compiles can
    serve (CoverageProven reason UnwarmableShapes), as the engine logs them, e.g. ("prompt", 1,
    8192, 1); the runner reports them as known gaps instead of failing.
    ``drafter_warmup``: every drafter shape of the plan (``prove_drafter``'s whole set), which
    the engine plugin warms directly inside the engine process (format
    warmgate-drafter-warmup/1, issue 33); None without a modelled drafter.
    ``shards``: the warmup's shard count the sync decided from the free Gaudi cards (issue 38,
    `reconcile.sync.shard_cards`), or kept from this plan's Job; None: no decision (an explicit
    count, capped, and 1 for auto: `resources.warmup_shards.planned_shards`).
    """

    buckets: BucketPlan
    estimated_warmup_s: float
    kv_blocks: int | None = None
    cache_claim_uid: str | None = None
    drafter_sweep: SweepSpec | None = None
    known_unwarmable: tuple[tuple[str, int, int, int], ...] = ()
    cache_users: CacheUsers | None = None
    cache_claim_name: str | None = None
    drafter_warmup: DrafterWarmupSpec | None = None
    shards: int | None = None
