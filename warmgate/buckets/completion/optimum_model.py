"""The decode-coverage conditions of added seeds as linear constraints over row maxima (exact)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from dataclasses import dataclass, field

from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import rows_of

__all__ = ["Constraint", "ModelUnavailable", "SeedModel", "Var", "build_model", "work_estimate"]

Var = tuple[int, int]
"""(row b, value v): the 0/1 variable "the largest added seed of row b has blocks >= v"."""


class ModelUnavailable(ValueError):
    """The configuration leaves the model's exact scope (the reason says which condition)."""


@dataclass(frozen=True, slots=True)
class Constraint:
    """sum(coef * x) <= rhs over 0/1 variables; coefs are +1 or -1."""

    terms: tuple[tuple[Var, int], ...]
    rhs: int


@dataclass(slots=True)
class SeedModel:
    """Which added seeds make every reachable decode step run a warmed bucket.

    Why row maxima suffice (docs/coverage.md, "Exact optimum"): a partial-draft step (n, S, T')
    pads to B = the first seed row >= n whose largest ctx is >= S (seed-first lookup), and is
    warmed exactly when full row B*T' reaches T'*S; full-draft and draft-free steps are always
    warmed. So only each row's largest seed matters, and an optimal set adds at most one seed per
    row, above the row's own largest. ``values[b]`` are the candidate blocks of row b: every
    threshold some constraint reads, plus values whose buckets the plan already holds.
    """

    plan: BucketPlan
    tokens: int
    per_seq: int
    seed_max: dict[int, int]
    full: dict[int, list[int]]
    constraints: list[Constraint] = field(default_factory=list)
    values: dict[int, set[int]] = field(default_factory=dict)
    # Some block target T'*S passes the fallback cap: it is clamped there, and the model keeps
    # the cap fixed (no added bucket above it). Otherwise added buckets may raise the cap, which
    # moves no target (all are below the old cap).
    cap_fixed: bool = False

    @property
    def fmc(self) -> int:
        """The plan's fallback cap: its largest decode block count, where lookups clamp."""
        return self.plan.fallback_max_ctx

    def row_range(self, b: int) -> tuple[int, int]:
        """Blocks a useful added seed of row b can take: above its largest seed, kept by the
        filter (bs <= blocks) and below the corrector clamp (b * blocks per sequence). With
        ``cap_fixed`` none of its buckets may pass the fallback cap either: an added bucket
        above it would raise the cap, and with it every clamped target."""
        hi = b * self.per_seq
        if self.cap_fixed:
            hi = min(hi, self.fmc)
            if min(hi * self.tokens, b * self.tokens * self.per_seq) > self.fmc:
                hi = min(hi, self.fmc // self.tokens)  # the expansion (b*T, 1, v*T) stays below
        return max(b, self.seed_max.get(b, 0) + 1), hi

    def buckets_of(self, seed: Bucket) -> list[Bucket]:
        """The decode buckets one seed puts in the list (PR #624 expansion, clamp included)."""
        b, _, c = seed
        big = b * self.tokens
        out = [seed, (big, 1, min(c * self.tokens, big * self.per_seq))]
        if big <= c:
            out.append((big, 1, c))
        return out

    def satisfied(self, seeds: Iterable[Bucket]) -> bool:
        """The model's verdict for these added seeds (decode coverage), without a solver."""
        top: dict[int, int] = {}
        for b, _, c in seeds:
            top[b] = max(top.get(b, 0), c)

        def value(var: Var) -> int:
            return int(top.get(var[0], 0) >= var[1])

        return all(
            sum(coef * value(var) for var, coef in con.terms) <= con.rhs for con in self.constraints
        )

    def _add(self, var: Var) -> Var:
        self.values.setdefault(var[0], set()).add(var[1])
        return var


def build_model(plan: BucketPlan, space: StateSpace) -> SeedModel:
    """The constraints of ``plan``'s decode space; raises ModelUnavailable out of scope."""
    cfg = plan.config
    if cfg.contiguous_pa:
        raise ModelUnavailable("contiguous PA pads on the highest block id, not modelled")
    model = SeedModel(
        plan,
        cfg.tokens_per_step,
        cfg.max_blocks_per_seq,
        {b: ctxs[-1] for (b, _), ctxs in rows_of(plan.seed_decode_buckets)},
        {b: ctxs for (b, _), ctxs in rows_of(plan.decode_buckets)},
    )
    _check_scope(model, space)
    partial = [t for t in space.tokens if 1 < t < model.tokens]
    model.cap_fixed = bool(partial) and max(partial) * _s_max(space) > model.fmc
    for t in space.tokens:
        if 1 < t < model.tokens:
            for s in range(1, _s_max(space) + 1):
                _add_state_constraints(model, space, t, s)
    _add_dedup_values(model)
    return model


def work_estimate(plan: BucketPlan, space: StateSpace) -> int:
    """An upper bound of the (S, T', row) triples ``build_model`` visits, in O(1): partial
    draft counts x the largest S x max_num_seqs (a step of S blocks may pad to any row from
    ceil(S / blocks per sequence) up to the first seed row that catches it). The build's CPU and
    the program's size grow with it; the operator does not try past a bound
    (``SolveBudget.work``)."""
    tokens = plan.config.tokens_per_step
    partial = sum(1 for t in space.tokens if 1 < t < tokens)
    return partial * _s_max(space) * space.max_num_seqs


def _s_max(space: StateSpace) -> int:
    return space.total_blocks(space.max_num_seqs)[1]


def _check_scope(model: SeedModel, space: StateSpace) -> None:
    """A step's own blocks must stay below the fallback cap, and every step must find a seed row.

    Block targets T'*S above the cap are clamped to it, as the engine's lookup does
    (``min(T*S, fmc)``); the model keeps the cap fixed by adding no bucket above it
    (``row_range``), so the clamped targets do not move. Outside these conditions the padded
    batch's own lookup clamps, or steps fall through to the full list, which the model skips.
    """
    fmc = model.plan.fallback_max_ctx
    if _s_max(space) > fmc:
        raise ModelUnavailable(f"steps' own blocks reach the fallback cap {fmc}")
    top_row = max(model.seed_max)
    if any(_first_seed_row(model, min(s, space.max_num_seqs), s) is None
           for s in range(1, _s_max(space) + 1)):  # fmt: skip
        raise ModelUnavailable(f"some steps fit no seed row (largest row {top_row})")


def _first_seed_row(model: SeedModel, n: int, s: int) -> int | None:
    """The padded batch of the original seeds: first row >= n whose largest ctx is >= s."""
    rows = sorted(model.seed_max)
    for b in rows[bisect_left(rows, n) :]:
        if model.seed_max[b] >= s:
            return b
    return None


def _add_state_constraints(model: SeedModel, space: StateSpace, t: int, s: int) -> None:
    """Steps of S = s blocks and T' = t tokens: for every row b they may pad to, padding there
    implies row b*t reaches t*s. The step with the most sequences n* = min(b, s, mns) gives the
    strongest condition (fewest earlier rows that could catch it), so it stands for all n."""
    m = min(s, space.max_num_seqs)
    lowest = -(-s // model.per_seq)  # fewer sequences cannot hold s blocks
    if lowest > m or space.total_blocks(m)[1] < s:
        return
    top = _first_seed_row(model, m, s)
    assert top is not None  # _check_scope
    for b in range(lowest, top + 1):
        constraint = _row_constraint(model, b, min(b, m), t, s)
        if constraint is not None:
            model.constraints.append(constraint)


def _row_constraint(model: SeedModel, b: int, n: int, t: int, s: int) -> Constraint | None:
    """a_b(s) - sum(a_b'(s) for b' in [n, b)) <= f_{b*t}(t*s), or None when always true."""
    terms: dict[Var, int] = {}
    for earlier in range(n, b):
        if model.seed_max.get(earlier, 0) >= s:
            return None  # an original row catches these steps first
        if s <= earlier * model.per_seq:
            terms[model._add((earlier, max(s, earlier)))] = -1
    rhs = 0
    if model.seed_max.get(b, 0) >= s:
        rhs = -1
    elif s <= b * model.per_seq:
        terms[model._add((b, max(s, b)))] = 1
    else:
        return None  # row b can never hold s blocks, so it never pads these steps
    wide, target = b * t, min(t * s, model.fmc)
    if model.full.get(wide, [0])[-1] >= target:
        return None
    for var in _row_fillers(model, wide, target):
        terms[model._add(var)] = terms.get(var, 0) - 1
    return Constraint(tuple(sorted(terms.items())), rhs)


def _row_fillers(model: SeedModel, wide: int, target: int) -> list[Var]:
    """Seeds that put a bucket >= target into full row ``wide``: one in the row itself, or one
    in row wide/T whose expansion (wide, 1, c*T) reaches it (the smaller (wide, 1, c) never
    reaches further)."""
    out: list[Var] = []
    lo, hi = model.row_range(wide)
    if max(target, lo) <= hi:
        out.append((wide, max(target, lo)))
    if wide % model.tokens == 0:
        r = wide // model.tokens
        lo, hi = model.row_range(r)
        value = max(-(-target // model.tokens), lo)
        if value <= hi:
            out.append((r, value))
    return out


def _add_dedup_values(model: SeedModel) -> None:
    """Candidate values whose buckets already exist, in the plan or from another candidate.

    Lowering a seed to the next candidate value never changes a constraint (none reads a value
    in between) and never costs more, unless its own bucket or expansion was already planned at
    the higher value: those values are candidates too.
    """
    t = model.tokens
    for b in sorted(model.values):
        lo, hi = model.row_range(b)
        mine = model.values[b]
        mine.update(c for c in model.full.get(b, []) if lo <= c <= hi)
        for c in model.full.get(b * t, []):
            mine.update(v for v in (c // t if c % t == 0 else 0, c) if lo <= v <= hi)
        if b * t in model.values:
            wide_lo, wide_hi = model.row_range(b * t)
            model.values[b * t].update(
                w for v in mine for w in (v * t, v) if wide_lo <= w <= wide_hi
            )
