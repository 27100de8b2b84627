"""The seeds one completion round adds: for each gap row, the cheaper of two seeds that reach it.

A virtual-batch row V gets a bucket of at least ``need`` blocks from a seed in row V itself, or,
through the engine's expansion (b, 1, c) -> (b*T, 1, c*T), from a seed (V/T, 1, ceil(need/T)).
The second is often cheaper: the seed bucket may already be planned, and one seed then serves
row V/T and row V at once. Either seed row also pads the steps it now catches first (seed-first
lookup, docs/coverage.md), and their partial-draft rows may need more: a penalty estimates that,
and the next round closes whatever is left (the prover decides, never this estimate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from warmgate.buckets.cost import CostParams, ModelProfile, graph_seconds
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.spec import expand_spec
from warmgate.buckets.engine.steps import rows_of

__all__ = ["SeedChooser", "decode_seconds"]

Cost = Callable[[Iterable[Bucket]], float]


def decode_seconds(buckets: Iterable[Bucket], model: ModelProfile | None = None) -> float:
    """Estimated compile seconds of decode buckets, the midpoint of the cost model's range.

    e.g. 8B BF16 (16, 1, 256): (0.4 + 1.0) / 2 = 0.7 s; every decode bucket below 128 rows and
    1024 blocks costs the same, so on small engines this counts buckets.
    """
    model, params = model or ModelProfile(), CostParams()
    return sum(
        (graph_seconds(b, False, model, params, 0) + graph_seconds(b, False, model, params, 1)) / 2
        for b in buckets
    )


@dataclass
class SeedChooser:
    """Picks seeds for the gap rows of one round, cheapest first by ``cost``, row by row."""

    plan: BucketPlan
    space: StateSpace
    cost: Cost
    chosen: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._planned = set(self.plan.decode_buckets)
        self._seed_max = {b: c[-1] for (b, _), c in rows_of(self.plan.seed_decode_buckets)}
        self._full = {b: c for (b, _), c in rows_of(self.plan.decode_buckets)}
        cfg = self.plan.config
        self._t = cfg.tokens_per_step
        self._per_seq = cfg.max_blocks_per_seq
        self._partial = [t for t in self.space.tokens if 1 < t < self._t]

    def choose(self, need: dict[int, int]) -> list[Bucket]:
        """Seeds that give every row V in ``need`` a bucket of at least need[V] blocks."""
        for wide in sorted(need):
            if self._reaches(wide) >= need[wide]:
                continue  # an expansion chosen for a smaller row already reaches it
            options = [(wide, max(need[wide], self.chosen.get(wide, 0)))]
            if wide % self._t == 0:
                options += self._source_options(wide // self._t, need[wide])
            best = min(options, key=self._score)
            self.chosen[best[0]] = best[1]
        return [(b, 1, c) for b, c in sorted(self.chosen.items())]

    def _source_options(self, row: int, need: int) -> list[tuple[int, int]]:
        """Seeds (row, c) with c*T >= need: the least such c, and the least planned bucket above
        it (its own bucket is then free), both within the filter and the corrector clamp."""
        least = max(-(-need // self._t), row, self.chosen.get(row, 0))
        if least > row * self._per_seq:
            return []
        out = [(row, least)]
        planned = [c for c in self._full.get(row, []) if least < c <= row * self._per_seq]
        if planned:
            out.append((row, planned[0]))
        return out

    def _reaches(self, wide: int) -> int:
        """The largest block count the chosen seeds put into row ``wide``."""
        top = 0
        if wide in self.chosen:
            top = self.chosen[wide]
        if wide % self._t == 0 and wide // self._t in self.chosen:
            top = max(top, min(self.chosen[wide // self._t] * self._t, wide * self._per_seq))
        return top

    def _score(self, option: tuple[int, int]) -> tuple[float, int]:
        """Marginal warmup cost of the round's seeds with this option, plus the capture penalty;
        ties go to the option listed first (the gap row's own seed)."""
        row, value = option
        trial = {**self.chosen, row: value}
        return self._added_cost(trial) + self._penalty(row, value, trial), -row

    def _added_cost(self, seeds: dict[int, int]) -> float:
        buckets = expand_spec(self.plan.config, [(b, 1, c) for b, c in seeds.items()])
        return self.cost(b for b in buckets if b not in self._planned)

    def _penalty(self, row: int, value: int, trial: dict[int, int]) -> float:
        """What the steps a new or raised seed row catches first would need next round.

        The caught steps hold up to s blocks: s = min(value, what min(row, mns) sequences hold),
        when that exceeds the row's own largest seed. Each partial-draft row row*T' whose
        largest bucket stays below T'*s will need a seed of its own: count one at that size.
        """
        old = self._seed_max.get(row, 0)
        caught = min(value, self.space.total_blocks(min(row, self.space.max_num_seqs))[1])
        if caught <= old or self._caught_earlier(row, caught):
            return 0.0
        penalty = 0.0
        for t in self._partial:
            wide, target = row * t, t * caught
            chosen = dict(trial)
            have = max(self._full.get(wide, [0])[-1], self._reach_in(chosen, wide))
            if have < target:
                penalty += self.cost(expand_spec(self.plan.config, [(wide, 1, target)]))
        return penalty

    def _caught_earlier(self, row: int, s: int) -> bool:
        """Steps of up to max_num_seqs sequences and s blocks already pad below ``row``."""
        mns = self.space.max_num_seqs
        return row > mns and any(mns <= b < row and m >= s for b, m in self._seed_max.items())

    def _reach_in(self, seeds: dict[int, int], wide: int) -> int:
        top = seeds.get(wide, 0)
        if wide % self._t == 0 and wide // self._t in seeds:
            top = max(top, seeds[wide // self._t] * self._t)
        return top
