"""The cheapest added seeds that close every decode gap, solved exactly with HiGHS (small configs).

HiGHS (``highspy``, a runtime dependency since issue 25) is imported only when a solve is
attempted. The operator attempts one within a deterministic ``SolveBudget`` (``completion.choose``)
and falls back to the greedy completion past it. The solver works on the row-maxima model of
``optimum_model``; its answer is re-planned from a seed file and checked by the coverage prover,
so a modelling error shows up as an error, never as a wrong optimum.
"""

from __future__ import annotations

import ctypes
import os
import sys
from dataclasses import dataclass
from typing import Any

from warmgate.buckets.completion.optimum_model import (
    ModelUnavailable,
    SeedModel,
    Var,
    build_model,
    work_estimate,
)
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.cost import ModelProfile
from warmgate.buckets.coverage.prove import prove_coverage
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.bucket_file import format_bucket_file
from warmgate.buckets.engine.config import EngineShapeConfig
from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan, plan_buckets

__all__ = ["Optimum", "OptimumUnavailable", "SolveBudget", "decode_seconds", "optimal_seeds"]

# Past this many 0/1 variables the program is not "small" any more; the answer would take minutes.
MAX_VARIABLES = 60_000


@dataclass(frozen=True, slots=True)
class SolveBudget:
    """Limits on one exact solve; past any of them the solve raises OptimumUnavailable.

    ``work`` bounds ``optimum_model.work_estimate`` before anything is built, ``variables`` and
    ``rows`` the program's 0/1 variables and constraints, ``nodes`` HiGHS's branch-and-bound
    nodes (``mip_max_nodes``): all are deterministic, so one input always gets the same answer.
    (HiGHS's ``simplex_iteration_limit`` does not stop its MIP's LP solves, so the root LP's
    iterations, most of the CPU here, are bounded only through the program's size.)
    ``time_s`` is HiGHS's wall-clock stop, a safety net for a loaded machine (only it can make
    two runs differ).
    """

    work: int | None = None
    variables: int = MAX_VARIABLES
    rows: int | None = None
    nodes: int | None = None
    time_s: float = 120.0


class OptimumUnavailable(RuntimeError):
    """No exact optimum for this configuration (out of scope, too large, or no solver)."""


@dataclass(frozen=True, slots=True)
class Optimum:
    """The cheapest added seeds, their decode buckets and cost, and how the answer was found."""

    seeds: tuple[Bucket, ...]
    decode: tuple[Bucket, ...]
    seconds: float
    plan: BucketPlan
    variables: int
    constraints: int
    solve_s: float  # HiGHS's own run time (wall clock)
    nodes: int = 0  # HiGHS's branch-and-bound nodes
    iterations: int = 0  # HiGHS's simplex iterations

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "seeds": [list(b) for b in self.seeds],
            "decode": [list(b) for b in self.decode],
            "estimated_s": round(self.seconds, 2),
            "variables": self.variables,
            "constraints": self.constraints,
            "solve_s": round(self.solve_s, 3),
            "nodes": self.nodes,
            "iterations": self.iterations,
        }


def optimal_seeds(
    cfg: EngineShapeConfig,
    partial_drafts: bool = True,
    *,
    prefix_caching: bool | None = None,
    model: ModelProfile | None = None,
    time_limit_s: float = 120.0,
    budget: SolveBudget | None = None,
) -> Optimum:
    """The cheapest set of seeds to add to ``cfg``'s plan so that no decode step runs unwarmed.

    Exact over every seed (b, 1, c) that can change a lookup (docs/coverage.md, "Exact
    optimum"); prompt gaps are a separate problem (prompt buckets never change decode lookups)
    and are not part of it. Raises OptimumUnavailable when the configuration is out of the
    model's scope, too large (``budget``), or highspy is not installed.
    """
    budget = budget or SolveBudget(time_s=time_limit_s)
    plan = plan_buckets(cfg)
    space = StateSpace.of(cfg, partial_drafts=partial_drafts, prefix_caching=prefix_caching)
    work = work_estimate(plan, space)
    if budget.work is not None and work > budget.work:
        raise OptimumUnavailable(f"too large to try: {work:,} (S, T, row) steps to model")
    try:
        seed_model = build_model(plan, space)
    except ModelUnavailable as exc:
        raise OptimumUnavailable(str(exc)) from exc
    seeds, program = _solve(seed_model, model, budget)
    done = _verified_plan(plan, seeds, partial_drafts, prefix_caching)
    added = tuple(sorted(set(done.decode_buckets) - set(plan.decode_buckets)))
    return Optimum(
        seeds,
        added,
        decode_seconds(added, model),
        done,
        program.binaries,
        len(program.rows),
        program.run_s,
        program.nodes,
        program.iterations,
    )


def _verified_plan(
    plan: BucketPlan, seeds: tuple[Bucket, ...], partial: bool, sharing: bool | None
) -> BucketPlan:
    """Re-plan from a seed file with the added seeds, as the engine would, and prove it."""
    text = format_bucket_file(
        plan.prompt_buckets, sorted({*plan.seed_decode_buckets, *seeds}), ("warmgate optimum",)
    )
    done = plan_buckets(
        EngineShapeConfig.model_validate({**plan.config.model_dump(), "bucket_file": text})
    )
    report = prove_coverage(done, partial, prefix_caching=sharing)
    gaps = [u.shape for u in report.uncovered if u.phase == "decode"]
    if gaps:
        raise OptimumUnavailable(f"the model's optimum leaves decode gaps {gaps[:3]}: a bug")
    return done


def _solve(
    seed_model: SeedModel, model: ModelProfile | None, budget: SolveBudget
) -> tuple[Any, _Program]:
    """Build and run the integer program; return the chosen seeds and the program (its size,
    nodes and iterations)."""
    try:
        import highspy  # noqa: PLC0415 - loaded only when a solve is attempted (its C++ library)
    except ImportError as exc:
        raise OptimumUnavailable("highspy is not installed (pip install warmgate)") from exc
    program = _Program(seed_model, model)
    if program.binaries > budget.variables:
        raise OptimumUnavailable(f"{program.binaries:,} variables: too large to solve exactly")
    if not program.columns:
        return (), program
    if budget.rows is not None and len(program.rows) > budget.rows:
        raise OptimumUnavailable(f"{len(program.rows):,} constraints: too large to solve exactly")
    solution = program.run(highspy, budget)
    return program.seeds(solution), program


def _quiet(make: Any) -> Any:
    """Call ``make`` with file descriptor 1 pointed at stderr: HiGHS prints its banner from C++
    when the first solver is built, before any option can silence it, and ``warmgate plan -o
    json`` owns stdout."""
    sys.stdout.flush()
    libc = ctypes.CDLL(None)
    saved = os.dup(1)
    try:
        os.dup2(2, 1)
        return make()
    finally:
        libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)


class _Program:
    """Columns: x[b, v] (0/1, monotone in v) for the threshold variables, then one continuous
    z[u] per bucket the plan lacks, forced to 1 when a chosen seed produces it."""

    def __init__(self, seed_model: SeedModel, model: ModelProfile | None) -> None:
        self.m = seed_model
        self.columns: list[Var] = [(b, v) for b in sorted(seed_model.values)
                                   for v in sorted(seed_model.values[b])]  # fmt: skip
        self.index = {var: i for i, var in enumerate(self.columns)}
        self.binaries = len(self.columns)
        self.nodes = self.iterations = 0
        self.run_s = 0.0
        self.rows: list[tuple[dict[int, float], float]] = []
        self.costs: list[float] = [0.0] * self.binaries
        self._chains()
        for con in seed_model.constraints:
            self.rows.append(({self.index[var]: coef for var, coef in con.terms}, con.rhs))
        self._bucket_costs(model)

    def _chains(self) -> None:
        """x[b, v_{i+1}] <= x[b, v_i]: a row's largest seed reaching v_{i+1} also reaches v_i."""
        for (b, v), (b2, v2) in zip(self.columns, self.columns[1:], strict=False):
            if b == b2:
                self.rows.append(({self.index[(b2, v2)]: 1.0, self.index[(b, v)]: -1.0}, 0.0))

    def _bucket_costs(self, model: ModelProfile | None) -> None:
        """y[b, v] = x[b, v] - x[b, next v] is 1 exactly when v is the row's chosen seed."""
        planned = set(self.m.plan.decode_buckets)
        zs: dict[Bucket, int] = {}
        for i, (b, v) in enumerate(self.columns):
            nxt = i + 1 if i + 1 < self.binaries and self.columns[i + 1][0] == b else None
            for bucket in self.m.buckets_of((b, 1, v)):
                if bucket in planned:
                    continue
                if bucket not in zs:
                    zs[bucket] = len(self.costs)
                    self.costs.append(decode_seconds([bucket], model))
                row = {i: 1.0, zs[bucket]: -1.0}  # z >= x[b, v] - x[b, next]
                if nxt is not None:
                    row[nxt] = -1.0
                self.rows.append((row, 0.0))

    def run(self, highspy: Any, budget: SolveBudget) -> list[float]:
        """Solve to proven optimality (zero gap) within the budget's nodes and seconds."""
        import numpy as np  # noqa: PLC0415 - highspy's own dependency

        h = _quiet(highspy.Highs)
        # Presolve off: on these programs it took 2-3 s of CPU where the whole solve without it
        # takes 0.1-0.3 s, with the same optimum (docs/benchmarks.md, "Completion at the optimum").
        for option, value in (("output_flag", False), ("time_limit", float(budget.time_s)),
                              ("mip_rel_gap", 0.0), ("threads", 1),
                              ("presolve", "off")):  # fmt: skip
            h.setOptionValue(option, value)
        if budget.nodes is not None:
            h.setOptionValue("mip_max_nodes", int(budget.nodes))
        n, none = len(self.costs), np.zeros(0, dtype=np.int32)
        h.addCols(n, np.array(self.costs), np.zeros(n), np.ones(n), 0, none, none, np.zeros(0))
        ints = np.arange(self.binaries, dtype=np.int32)
        h.changeColsIntegrality(self.binaries, ints, np.ones(self.binaries, dtype=np.uint8))
        starts: list[int] = []
        indices: list[int] = []
        values: list[float] = []
        for coefs, _ in self.rows:
            starts.append(len(indices))
            indices.extend(coefs)
            values.extend(coefs.values())
        upper = np.array([rhs for _, rhs in self.rows])
        h.addRows(len(self.rows), np.full(len(self.rows), -np.inf), upper, len(indices),
                  np.array(starts, dtype=np.int32), np.array(indices, dtype=np.int32),
                  np.array(values))  # fmt: skip
        h.run()
        status = h.modelStatusToString(h.getModelStatus())
        self.run_s = float(h.getRunTime())
        info = h.getInfo()
        self.nodes, self.iterations = int(info.mip_node_count), int(info.simplex_iteration_count)
        if status != "Optimal":
            raise OptimumUnavailable(f"HiGHS stopped without a proven optimum: {status}")
        return list(h.getSolution().col_value)

    def seeds(self, solution: list[float]) -> tuple[Bucket, ...]:
        """The largest chosen value of every row with a seed."""
        top: dict[int, int] = {}
        for (b, v), x in zip(self.columns, solution, strict=False):
            if x > 0.5:
                top[b] = max(top.get(b, 0), v)
        return tuple(sorted((b, 1, v) for b, v in top.items()))
