"""The drafter warmup sweep: server requests that make the drafter run its unwarmed shapes.

After the engine's own warmup, the runner (phase 2 of issue 16) sends each step's requests to
the running OpenAI-compatible server at once: ``concurrency`` completions of ``prompt_tokens``
distinct token ids, ``max_tokens`` = min_tokens, temperature 0, ignore_eos. ``plan_sweep`` picks
the steps greedily (most new shapes per estimated second) until every drivable shape is driven or
the time budget is spent, and says why the rest are not. A step lists only the shapes it runs for
sure under the assumptions of ``sweep_ramp`` (whatever the drafts' acceptance), so a wrong
assumption shows up as a compile during the later probe, never as a silent hole.

    sweep = plan_sweep(plan, prove_drafter(plan, "eagle3"), budget_s=1800)
    sweep.spec.to_json()  # plain JSON: steps, expected shapes, undriven shapes with reasons

The planner builds the document's own type, ``warmgate.contract.sweepplan.SweepSpec``, which the
runner reads back; ``DrafterSweep`` adds only the planner's unrounded estimate.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from warmgate.buckets.cost import ModelProfile, SweepCostParams, SweepStepCost
from warmgate.buckets.drafter.graphs import DrafterReport, engine_graph
from warmgate.buckets.drafter.ramp import Ramp, RampOracle
from warmgate.buckets.drafter.walk import DrafterWalk, Key
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.contract.sweepplan import SWEEP_FORMAT, SweepSpec, SweepStepSpec

__all__ = ["SWEEP_FORMAT", "DrafterSweep", "plan_sweep"]

DEFAULT_BUDGET_S = 1800.0
ASSUMPTIONS = (
    "the server is idle when a step starts and all its requests reach the scheduler within "
    "arrival_steps engine steps",
    "prompts are distinct token ids (no prefix-cache hits); greedy, ignore_eos, max_tokens = "
    "min_tokens: every request produces exactly max_tokens tokens",
    "vLLM V1 scheduling: running requests first with 1 + k tokens each, then waiting ones first "
    "come first served, prompts chunked to max_num_batched_tokens; one prompt per prefill batch",
    "eagle, eagle3 and mtp propose k drafts after every prefill and decode",
    "nothing is preempted (each step's KV blocks fit, checked when num_gpu_blocks is known)",
)
REASONS = {
    "prompt": "a target prompt shape: the engine's prompt warmup runs the drafter on every "
    "prompt bucket, so completing the target plan warms it",
    "partial": "partial drafts only: eagle-type drafters always propose k tokens, so T < 1 + k "
    "needs the first scheduled decode within k tokens of max_model_len",
    "structured": "partial drafts only, ordinary traffic with structured outputs (grammar "
    "validation truncates drafts anywhere), but no request form makes the grammar keep a chosen "
    "number of drafts, so no step runs it for sure",
    "contiguous": "contiguous PA: the block bucket follows the highest block id, which requests "
    "cannot steer",
    "unsure": "no step runs it for sure: its window of S is narrower than one decode step's "
    "growth, or needs more than max_model_len, max_num_batched_tokens or the KV blocks allow",
    "kv": "reached only with more block references than the KV cache holds (requests sharing "
    "prefixes); the sweep's prompts are distinct",
    "budget": "over the sweep's time budget",
}


@dataclass(frozen=True, slots=True)
class DrafterSweep:
    """The planned sweep: the runner's document and the planner's unrounded (low, high) estimate
    of its seconds, which the planning's totals add (the document rounds it to 0.1 s)."""

    spec: SweepSpec
    seconds: tuple[float, float]


@dataclass(frozen=True, slots=True)
class _Choice:
    """One step the greedy took: its requests, the unwarmed shapes it surely runs, how many of
    them no earlier step ran, and its (low, high) estimated seconds."""

    ramp: Ramp
    gain: frozenset[Key]
    new: int
    seconds: tuple[float, float]


def plan_sweep(
    plan: BucketPlan,
    report: DrafterReport,
    *,
    budget_s: float = DEFAULT_BUDGET_S,
    model: ModelProfile | None = None,
    params: SweepCostParams | None = None,
    arrival_steps: int = 2,
) -> DrafterSweep:
    """Steps that drive every drivable unwarmed drafter shape of ``report``, within ``budget_s``.

    ``report`` must come from ``prove_drafter(plan, ...)``. Seconds are the high estimate of
    ``estimate_sweep_step``: a step is taken only when it still fits the budget.
    """
    if not report.has_drafter or not report.unwarmed:
        return _sweep(report, [], {}, budget_s, arrival_steps)
    reasons, drivable = _classify(plan, report)
    oracle = RampOracle(plan, DrafterWalk(plan, report.space), arrival_steps)
    ramps, within = _candidates(plan, oracle, drivable)
    gains = {r: oracle.guaranteed(r) & drivable for r in ramps}
    chosen = _greedy(gains, budget_s, report.k, model, params)
    driven = {key for choice in chosen for key in choice.gain}
    reachable = set().union(*gains.values()) if gains else set()
    for key in drivable - driven:
        why = "budget" if key in reachable else "unsure" if key in within else "kv"
        reasons[key] = REASONS[why]
    return _sweep(report, chosen, reasons, budget_s, arrival_steps)


def _sweep(
    report: DrafterReport,
    chosen: Sequence[_Choice],
    reasons: dict[Key, str],
    budget_s: float,
    arrival_steps: int,
) -> DrafterSweep:
    """The sweep document of the greedy's choices, with its unrounded estimate."""
    low = sum(choice.seconds[0] for choice in chosen)
    high = sum(choice.seconds[1] for choice in chosen)
    spec = SweepSpec(
        method=report.method,
        k=report.k,
        temperature=0.0,
        ignore_eos=True,
        steps=tuple(_step(choice) for choice in chosen),
        targets=len(report.unwarmed),
        undriven=tuple((engine_graph(key), why) for key, why in sorted(reasons.items())),
        budget_s=float(budget_s),
        seconds=(round(low, 1), round(high, 1)),
        arrival_steps=arrival_steps,
        driven=len({key for choice in chosen for key in choice.gain}),
        assumptions=ASSUMPTIONS,
    )
    return DrafterSweep(spec, (low, high))


def _classify(plan: BucketPlan, report: DrafterReport) -> tuple[dict[Key, str], set[Key]]:
    """Split the unwarmed shapes into those a sweep can drive and the rest, with a reason."""
    reasons: dict[Key, str] = {}
    drivable: set[Key] = set()
    partial = REASONS["structured" if report.structured_outputs else "partial"]
    for shape in report.unwarmed:
        if shape.phase == "prompt":
            reasons[shape.key] = REASONS["prompt"]
        elif not shape.full_drafts:
            reasons[shape.key] = partial
        elif plan.config.contiguous_pa:
            reasons[shape.key] = REASONS["contiguous"]
        else:
            drivable.add(shape.key)
    return reasons, drivable


def _candidates(
    plan: BucketPlan, oracle: RampOracle, drivable: set[Key]
) -> tuple[list[Ramp], set[Key]]:
    """The cheapest sure step for every window of every drivable shape, plus prompt steps.

    Also returns the drivable shapes that some window within the KV cache holds (distinct
    prompts cannot put more block references in flight than the cache has blocks).
    """
    found: dict[tuple[int, int, int], Ramp] = {}
    within: set[Key] = set()
    cfg = plan.config
    reach = -(-(cfg.max_model_len - oracle.k - 1) // cfg.block_size)  # blocks a step can grow to
    kv = cfg.num_gpu_blocks
    for n in _concurrencies(plan, oracle):
        top = n * reach if kv is None else min(n * reach, kv)
        for u, v, key in oracle.windows(n, n, top):
            if key in drivable:
                within.add(key)
                ramp = oracle.cheapest(n, u, v)
                if ramp is None:
                    continue
                for each in (ramp, oracle.longest(ramp)):
                    found.setdefault((n, each.prompt_tokens, each.max_tokens), each)
        for blocks in sorted(oracle.starts(n, top)):
            opening = oracle.opening(n, blocks)
            if opening is not None:
                found.setdefault((n, opening.prompt_tokens, opening.max_tokens), opening)
    for ramp in _prompt_steps(plan, oracle, drivable):
        found.setdefault((1, ramp.prompt_tokens, ramp.max_tokens), ramp)
        within |= oracle.guaranteed(ramp) & drivable
    return list(found.values()), within


def _concurrencies(plan: BucketPlan, oracle: RampOracle) -> list[int]:
    """1, and for each seed row b: b and (previous row) + 1, the ends of the runs padded to b."""
    rows = sorted({b for b, _, _ in plan.seed_decode_buckets})
    ns = {1}
    previous = 0
    for b in rows:
        ns.update((b, previous + 1))
        previous = b
    return [n for n in sorted(ns) if oracle.prefill_steps(n, 1) is not None]


def _prompt_steps(plan: BucketPlan, oracle: RampOracle, drivable: set[Key]) -> list[Ramp]:
    """One request per batch-1 shape: its prompt's calls 2..k run (1, 1, C), X = ceil(L / block)."""
    if oracle.k < 2:
        return []
    walk, block = oracle.walk, plan.config.block_size
    out = []
    for xa, _, ctx in walk.decode.block_pieces(1, 1, -(-2 // block), walk.bps):
        if ("decode", (1, 1, ctx)) in drivable:
            ramp = oracle.ramp(1, max(1, (xa - 1) * block), 1)
            if ramp is not None:
                out.append(ramp)
    return out


def _greedy(
    gains: dict[Ramp, set[Key]],
    budget_s: float,
    k: int,
    model: ModelProfile | None,
    params: SweepCostParams | None,
) -> list[_Choice]:
    """Take the step with the most new shapes per (high) second while it fits the budget.

    Each round re-prices every step by its count of shapes not covered yet; the counts are kept
    up to date as shapes get covered (``holders``) instead of recounted, and a step's cost is
    its fixed part plus its new graphs (`SweepStepCost`): the same choices, in linear time.
    The rounds' choice comes from a heap (`_Offers`) rather than a scan of every step.
    """
    ramps = list(gains)  # by index: a Ramp's dataclass hash is not cached
    sets = [gains[ramp] for ramp in ramps]
    costs = [_cost(ramp, k, model, params or SweepCostParams()) for ramp in ramps]
    new = [len(gain) for gain in sets]
    holders: dict[Key, list[int]] = {}
    for i, gain in enumerate(sets):
        for key in gain:
            holders.setdefault(key, []).append(i)
    steps: list[_Choice] = []
    covered: set[Key] = set()
    spent = 0.0
    offers = _Offers(costs, [_order(ramp) for ramp in ramps], new)
    while True:
        chosen = offers.best(spent, budget_s)
        if chosen is None:
            return steps
        cost = costs[chosen].seconds(new[chosen])
        steps.append(_Choice(ramps[chosen], frozenset(sets[chosen]), new[chosen], cost))
        repriced = set()
        for key in sets[chosen] - covered:
            for holder in holders[key]:
                new[holder] -= 1
                repriced.add(holder)
        offers.reprice(repriced)
        covered |= sets[chosen]
        spent += cost[1]


class _Offers:
    """The greedy's steps by (rate, order), rate = -(new shapes) / (high seconds): a heap.

    Each round's choice is the smallest (rate, order) among the steps with new shapes that fit
    the budget, exactly as a scan of every step finds it. A step's entry is replaced when its
    count of new shapes changes (an entry with an old count is skipped); a step that does not
    fit is dropped until its count changes, since the seconds spent only grow.
    """

    def __init__(
        self, costs: list[SweepStepCost], orders: list[tuple[int, int, int]], new: list[int]
    ) -> None:
        self._costs, self._orders, self._new = costs, orders, new
        self._heap: list[tuple[float, tuple[int, int, int], int, int, float]] = []
        self.reprice(range(len(new)))

    def reprice(self, steps: Iterable[int]) -> None:
        """Offer ``steps`` again at their current count (none for a step with nothing new)."""
        for i in steps:
            count = self._new[i]
            if count:
                high = self._costs[i].seconds(count)[1]
                rate = -count / max(high, 1e-9)
                heapq.heappush(self._heap, (rate, self._orders[i], i, count, high))

    def best(self, spent: float, budget_s: float) -> int | None:
        """The round's step: the best current offer with ``spent + high <= budget_s``."""
        heap, new = self._heap, self._new
        while heap:
            _, _, i, count, high = heapq.heappop(heap)
            if count == new[i] and spent + high <= budget_s:
                return i
        return None


def _order(ramp: Ramp) -> tuple[int, int, int]:
    return ramp.concurrency, ramp.prompt_tokens, ramp.max_tokens


def _cost(ramp: Ramp, k: int, model: ModelProfile | None, params: SweepCostParams) -> SweepStepCost:
    """The step's `estimate_sweep_step` as fixed seconds plus seconds per new graph."""
    n = ramp.concurrency
    tokens = n * ramp.prompt_tokens
    return SweepStepCost.of(n * (1 + k), tokens, ramp.engine_steps, model, params)


def _step(choice: _Choice) -> SweepStepSpec:
    ramp = choice.ramp
    kind = "decode" if ramp.decodes else "prompt"
    return SweepStepSpec(
        name=f"drafter-{kind}-n{ramp.concurrency}-p{ramp.prompt_tokens}-m{ramp.max_tokens}",
        concurrency=ramp.concurrency,
        prompt_tokens=ramp.prompt_tokens,
        max_tokens=ramp.max_tokens,
        expected=tuple(engine_graph(key) for key in sorted(choice.gain)),
        new=choice.new,
        decode_s_range=(ramp.s_first, ramp.s_last) if ramp.decodes else (0, -1),
        engine_steps=ramp.engine_steps,
        seconds=(round(choice.seconds[0], 1), round(choice.seconds[1], 1)),
    )
