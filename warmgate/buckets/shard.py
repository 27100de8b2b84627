"""Sharded warmup (issue 38): a plan's graphs in N slices of about equal estimated compile time.

Each slice is what one engine process warms from its own seed file (``VLLM_BUCKETING_FROM_FILE``,
§2.6): some prompt buckets, some decode seeds (which that engine expands for k again, so a
slice's decode list is ``expand_spec`` of its seeds) and some drafter shapes (the plan's
``drafter_warmup``, warmed by the engine plugin). The units the slicing moves are therefore the
prompt buckets, the decode seeds (each with the spec rows it expands to) and the drafter shapes;
each is in exactly one slice. A spec row two seeds of different slices both expand to (config A,
k=1: seed (1, 1, 32) -> (2, 1, 64), itself a seed) is compiled by both engines: it is *owned* by
one slice (the seed's, else the lowest index) and *duplicated* in the others, and every slice's
estimate counts the graphs its engine really compiles.

The slicing is the longest-processing-time greedy: units by descending estimated seconds (the
cost model's high bound), each to the slice whose load grows least (its new graphs only), ties to
the lower index; deterministic. The engine refuses a file with no bucket of a phase ("Generated
0 prompt buckets", §2.6), so every slice gets at least one prompt bucket and one decode seed: a
unit of a phase goes to a slice still without that phase as soon as the units left of the phase
are no more than such slices. Hence at most ``max_shards(plan)`` slices.

Pure: only the engine port and the cost model. Nothing here has run on Gaudi: that recipes one
process compiled are hits in another process with a different bucket file is vllm-gaudi's
documented recipe cache behaviour (§4.6), to be confirmed there, and so is the speed-up.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from warmgate.buckets.cost import (
    CostParams,
    ModelProfile,
    estimate_buckets,
    estimate_direct_warmup,
    graph_seconds,
)
from warmgate.buckets.engine.bucket_file import format_bucket_file
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.spec import expand_spec

__all__ = [
    "DrafterShape",
    "PlanSlice",
    "ShardedPlan",
    "max_shards",
    "slice_plan",
]

# A drafter shape as the plan's drafter_warmup lists it: [phase, batch, query, blocks].
DrafterShape = tuple[str, int, int, int]

_PROMPT, _SEED, _DRAFTER = 0, 1, 2


@dataclass(frozen=True, slots=True)
class _Unit:
    kind: int
    key: tuple[Any, ...]
    # The graphs this unit makes its engine compile: (kind, shape), kind 0 prompt, 1 decode,
    # 2 drafter; and the seconds of each (high bound).
    graphs: tuple[tuple[int, tuple[Any, ...]], ...]
    costs: tuple[float, ...]

    @property
    def seconds(self) -> float:
        """The unit's compile seconds alone (high bound)."""
        return sum(self.costs)


@dataclass(frozen=True)
class PlanSlice:
    """One shard's part of a plan: what its engine is given and what it compiles.

    ``prompt``, ``seeds`` and ``drafter`` partition the plan's lists across the slices;
    ``decode`` is ``expand_spec(seeds)``, what the engine builds from them; ``owned_decode`` the
    rows of ``decode`` this slice owns (the decode lists of all slices' owned rows partition the
    plan's decode list); ``low_s``/``high_s`` the estimate of this engine's warmup (every graph
    it compiles, duplicated rows included, plus one sampler warmup)."""

    index: int
    prompt: tuple[Bucket, ...]
    seeds: tuple[Bucket, ...]
    decode: tuple[Bucket, ...]
    owned_decode: tuple[Bucket, ...]
    drafter: tuple[DrafterShape, ...]
    low_s: float
    high_s: float
    compile_s: float  # the high bound without the per-process overhead (the balance's measure)

    @property
    def duplicated_decode(self) -> tuple[Bucket, ...]:
        """Decode rows this engine compiles that another slice owns."""
        owned = set(self.owned_decode)
        return tuple(b for b in self.decode if b not in owned)

    @property
    def graphs(self) -> int:
        """Graphs this engine compiles: prompt, decode (expanded) and drafter shapes."""
        return len(self.prompt) + len(self.decode) + len(self.drafter)

    def bucket_plan(self, plan: BucketPlan) -> BucketPlan:
        """The slice as the engine will plan it from its seed file (same config)."""
        return BucketPlan(plan.config, self.prompt, self.seeds, self.decode)

    def bucket_file(self, plan: BucketPlan, shards: int) -> str:
        """The slice's ``VLLM_BUCKETING_FROM_FILE`` text (seeds only, like the plan's)."""
        cfg = plan.config
        header = (
            f"warmgate bucket plan {plan.digest[:16]} shard {self.index + 1} of {shards} "
            f"(vllm-gaudi profile {cfg.profile})",
            f"seed decode buckets only: the engine expands them for k={cfg.num_speculative_tokens}",
        )
        return format_bucket_file(self.prompt, self.seeds, header)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready counts and estimate."""
        return {
            "index": self.index,
            "prompt": len(self.prompt),
            "seed_decode": len(self.seeds),
            "decode": len(self.decode),
            "duplicated_decode": len(self.duplicated_decode),
            "drafter": len(self.drafter),
            "graphs": self.graphs,
            "low_s": round(self.low_s, 1),
            "high_s": round(self.high_s, 1),
        }


@dataclass(frozen=True)
class ShardedPlan:
    """A plan in ``len(slices)`` slices, with the single-process estimate it is measured by."""

    slices: tuple[PlanSlice, ...]
    single_low_s: float
    single_high_s: float
    single_compile_s: float
    # The greedy's bound: no slice's compile seconds exceed the mean by more than this (the
    # largest unit: a prompt bucket, a seed with its spec rows, or a drafter shape), except
    # where the one-of-each-phase rule forced a unit (``forced``).
    largest_unit_s: float
    forced: int = 0

    @property
    def shards(self) -> int:
        """How many slices (engine processes)."""
        return len(self.slices)

    @property
    def wall_s(self) -> tuple[float, float]:
        """The sharded warmup's estimated wall time (low, high): its slowest engine."""
        return max(s.low_s for s in self.slices), max(s.high_s for s in self.slices)

    @property
    def balance(self) -> float:
        """Worst slice's compile seconds over the mean slice's (1.0 is a perfect split)."""
        loads = [s.compile_s for s in self.slices]
        mean = sum(loads) / len(loads)
        return max(loads) / mean if mean else 1.0

    @property
    def speedup_goal_ratio(self) -> float:
        """Sharded wall (high) over single-process (high) / N: the issue's goal is <= 1.2."""
        ideal = self.single_high_s / self.shards
        return self.wall_s[1] / ideal if ideal else 1.0

    @property
    def duplicated(self) -> int:
        """Decode graphs compiled by more than one engine (counted once per extra engine)."""
        return sum(len(s.duplicated_decode) for s in self.slices)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the shards, the wall estimate, the balance and the goal's ratio."""
        return {
            "shards": self.shards,
            "single_s": [round(self.single_low_s), round(self.single_high_s)],
            "wall_s": [round(self.wall_s[0]), round(self.wall_s[1])],
            "balance": round(self.balance, 3),
            "goal_ratio": round(self.speedup_goal_ratio, 3),
            "duplicated_decode": self.duplicated,
            "slices": [s.to_dict() for s in self.slices],
        }


def max_shards(plan: BucketPlan) -> int:
    """The most slices a plan has: each needs a prompt bucket and a decode seed (§2.6)."""
    return max(1, min(len(plan.prompt_buckets), len(plan.seed_decode_buckets)))


def slice_plan(
    plan: BucketPlan,
    shards: int,
    *,
    drafter: Sequence[DrafterShape] = (),
    model: ModelProfile | None = None,
    params: CostParams | None = None,
) -> ShardedPlan:
    """Split ``plan`` (and its drafter shapes) into ``shards`` slices of about equal estimated
    compile time. Raises ValueError for fewer than 1 or more than ``max_shards(plan)`` shards."""
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    if shards > max_shards(plan):
        raise ValueError(
            f"{shards} shards: a plan of {len(plan.prompt_buckets)} prompt buckets and "
            f"{len(plan.seed_decode_buckets)} decode seeds has at most {max_shards(plan)} "
            "(every engine needs a bucket of each phase)"
        )
    model = model or ModelProfile()
    params = params or CostParams()
    drafter = sorted(set(drafter))  # each shape once, in one order: the same slices every time
    units = _units(plan, drafter, model, params)
    groups, forced = _assign(units, shards)
    built = [_slice(i, group, plan, model, params) for i, group in enumerate(groups)]
    single = estimate_buckets(plan.prompt_buckets, plan.decode_buckets, model, params)
    drafter_single = _drafter_seconds(drafter, model)
    return ShardedPlan(
        slices=_own(built, plan),
        single_low_s=single.low_s + drafter_single[0],
        single_high_s=single.high_s + drafter_single[1],
        single_compile_s=sum(u.seconds for u in _units(plan, drafter, model, params, dedup=True)),
        largest_unit_s=max(u.seconds for u in units),
        forced=forced,
    )


def _units(
    plan: BucketPlan,
    drafter: Iterable[DrafterShape],
    model: ModelProfile,
    params: CostParams,
    *,
    dedup: bool = False,
) -> list[_Unit]:
    """The plan's movable units with the graphs each compiles; ``dedup``: every plan graph once
    (the single process's compile seconds)."""
    cfg = plan.config
    units = [
        _Unit(_PROMPT, b, ((_PROMPT, b),), (graph_seconds(b, True, model, params, 1),))
        for b in plan.prompt_buckets
    ]
    seen: set[Bucket] = set()
    for seed in plan.seed_decode_buckets:
        rows = tuple(expand_spec(cfg, [seed]))
        if dedup:
            rows = tuple(r for r in rows if r not in seen)
            seen.update(rows)
        costs = tuple(graph_seconds(r, False, model, params, 1) for r in rows)
        units.append(_Unit(_SEED, seed, tuple((_SEED, r) for r in rows), costs))
    for shape in sorted(set(drafter)):
        seconds = _drafter_seconds([shape], model)[1]
        units.append(_Unit(_DRAFTER, shape, ((_DRAFTER, shape),), (seconds,)))
    return units


def _drafter_seconds(shapes: Iterable[DrafterShape], model: ModelProfile) -> tuple[float, float]:
    """The direct drafter warmup's estimate, every shape priced as a compile (the upper bound:
    which ones the engine's own warmup already built is Gaudi's to tell)."""
    return estimate_direct_warmup(list(shapes), (), model)


def _assign(units: list[_Unit], shards: int) -> tuple[list[list[_Unit]], int]:
    """Longest-processing-time greedy with marginal costs and the one-of-each-phase rule."""
    cost = {g: c for u in units for g, c in zip(u.graphs, u.costs, strict=True)}
    order = sorted(units, key=lambda u: (-u.seconds, u.kind, u.key))
    groups: list[list[_Unit]] = [[] for _ in range(shards)]
    loads = [0.0] * shards
    built: list[set[tuple[int, tuple[Any, ...]]]] = [set() for _ in range(shards)]
    left = {k: sum(1 for u in units if u.kind == k) for k in (_PROMPT, _SEED)}
    forced = 0
    for unit in order:
        candidates = list(range(shards))
        if unit.kind in left:
            lacking = [i for i in candidates if not any(u.kind == unit.kind for u in groups[i])]
            if lacking and left[unit.kind] <= len(lacking):
                forced += len(lacking) < shards
                candidates = lacking
            left[unit.kind] -= 1

        def grown(i: int, unit: _Unit = unit) -> tuple[float, int]:
            extra = sum(cost[g] for g in set(unit.graphs) - built[i])
            return loads[i] + extra, i

        best = min(candidates, key=grown)
        loads[best] = grown(best)[0]
        built[best].update(unit.graphs)
        groups[best].append(unit)
    return groups, forced


def _slice(
    index: int, units: list[_Unit], plan: BucketPlan, model: ModelProfile, params: CostParams
) -> PlanSlice:
    prompt = tuple(sorted(u.key for u in units if u.kind == _PROMPT))
    seeds = tuple(sorted(u.key for u in units if u.kind == _SEED))
    drafter = tuple(sorted(u.key for u in units if u.kind == _DRAFTER))
    decode = tuple(expand_spec(plan.config, seeds))
    est = estimate_buckets(prompt, decode, model, params)
    extra = _drafter_seconds(drafter, model)
    compile_s = sum(graph_seconds(b, True, model, params, 1) for b in prompt)
    compile_s += sum(graph_seconds(b, False, model, params, 1) for b in decode) + extra[1]
    return PlanSlice(
        index=index,
        prompt=prompt,
        seeds=seeds,
        decode=decode,
        owned_decode=(),
        drafter=drafter,
        low_s=est.low_s + extra[0],
        high_s=est.high_s + extra[1],
        compile_s=compile_s,
    )


def _own(slices: list[PlanSlice], plan: BucketPlan) -> tuple[PlanSlice, ...]:
    """Give every decode row of the plan one owner: the slice of its seed, else the lowest
    index that builds it."""
    seed_of = {b: s.index for s in slices for b in s.seeds}
    owner: dict[Bucket, int] = {}
    for row in plan.decode_buckets:
        if row in seed_of:
            owner[row] = seed_of[row]
        else:
            owner[row] = min(s.index for s in slices if row in set(s.decode))
    out = []
    for s in slices:
        owned = tuple(b for b in s.decode if owner.get(b) == s.index)
        out.append(
            PlanSlice(
                s.index, s.prompt, s.seeds, s.decode, owned, s.drafter, s.low_s, s.high_s,
                s.compile_s,
            )
        )  # fmt: skip
    return tuple(out)
