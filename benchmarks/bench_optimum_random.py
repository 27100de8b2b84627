"""Completion against the exact optimum, and decode padding before and after, on random engines.

Issue 25 items 6 and 7. Draws small engines (max_num_seqs 2-24, max_model_len 2-24 blocks,
blocks of 64, 128 or 256 tokens, 8-240 KV blocks, strategies exp/lin/pad, k 1-4, both profiles,
prefix caching on and off) from a fixed seed, keeps those whose completion adds decode seeds, and
prints per engine: the greedy completion's decode seconds (midpoint of the cost model, 8B BF16),
the exact optimum's (HiGHS, no budget but a 120 s stop), their ratio, the solve's size and CPU;
then the mean decode KV-block padding (padded/real, every reachable decode step) of the engine's
plan, the coverage completion and the refined plan warmgate warms by default (within 1.05x of
the engine's), with the buckets refinement adds. Summaries: ratio worst and mean, per strategy
and k, how many the operator's budget would solve, and the padding means.

Run: .venv/bin/python benchmarks/bench_optimum_random.py [--count 200] [--seed 25] [--csv FILE]
(about 10-20 minutes on one core), or ``--examples`` for the repository's examples (8192 KV
blocks where a manifest does not pin them): the plan warmgate warms under each objective, its
source, decode buckets and seconds, and the padding. Prints figures only.
"""

from __future__ import annotations

import argparse
import csv
import random
import statistics
import sys
import time
from collections import defaultdict
from typing import Any

from warmgate.buckets import EngineShapeConfig, plan_buckets, plan_diff
from warmgate.buckets.completion.choose import OPERATOR_BUDGET, PADDING_BOUND
from warmgate.buckets.completion.complete import CompletionError, UnwarmableError, complete_proven
from warmgate.buckets.completion.optimum import OptimumUnavailable, SolveBudget, optimal_seeds
from warmgate.buckets.completion.optimum_model import work_estimate
from warmgate.buckets.completion.refine import refine_padding
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.coverage.padding import decode_padding
from warmgate.buckets.coverage.states import StateSpace

STRATEGIES = ("exp", "lin", "pad")
PROFILES = ("v0.26.0", "main-2026-08")


def draw(rng: random.Random) -> tuple[EngineShapeConfig, bool]:
    """One random small engine and its prefix-caching switch."""
    block = rng.choice((64, 128, 256))
    mns = rng.randint(2, 24)
    cfg = EngineShapeConfig(
        max_num_seqs=mns,
        max_model_len=rng.randint(2, 24) * block,
        max_num_batched_tokens=rng.randint(1, 4) * block,
        block_size=block,
        num_gpu_blocks=rng.randint(8, 240),
        num_speculative_tokens=rng.randint(1, 4),
        strategy=rng.choice(STRATEGIES),
        profile=rng.choice(PROFILES),
        speculative_method="ngram",  # decode seeds are the subject; see bench_completion.py
    )
    return cfg, rng.random() < 0.5


def greedy(cfg: EngineShapeConfig, sharing: bool) -> Any:
    try:
        plan, _ = complete_proven(cfg, prefix_caching=sharing)
    except UnwarmableError as caught:  # prefills no bucket serves: its plan covers every decode
        plan = caught.plan
    return plan


def measure(cfg: EngineShapeConfig, sharing: bool) -> dict[str, Any] | None:
    """Every figure of one engine, or None when completion adds no decode seed."""
    engine = plan_buckets(cfg)
    done = greedy(cfg, sharing)
    added = plan_diff(engine, done).added_decode
    if not added:
        return None
    space = StateSpace.of(cfg, partial_drafts=True, prefix_caching=sharing)
    row: dict[str, Any] = {
        "strategy": cfg.strategy,
        "k": cfg.num_speculative_tokens,
        "block": cfg.block_size,
        "profile": cfg.profile,
        "sharing": sharing,
        "engine": f"mns {cfg.max_num_seqs} mml {cfg.max_model_len} mbt "
        f"{cfg.max_num_batched_tokens} kv {cfg.num_gpu_blocks}",
        "greedy_s": decode_seconds(added),
        "work": work_estimate(engine, space),
    }
    row.update(_optimum(cfg, sharing, engine, row["work"]))
    row.update(_padding(engine, done, space))
    return row


def _optimum(cfg: EngineShapeConfig, sharing: bool, engine: Any, work: int) -> dict[str, Any]:
    start = time.process_time()
    try:
        best = optimal_seeds(cfg, prefix_caching=sharing, budget=SolveBudget(time_s=120.0))
    except OptimumUnavailable as exc:
        return {"optimum": str(exc)[:60], "opt_cpu": time.process_time() - start}
    cpu = time.process_time() - start
    budget = OPERATOR_BUDGET
    within = (
        (budget.work is None or work <= budget.work)
        and best.variables <= budget.variables
        and (budget.rows is None or best.constraints <= budget.rows)
        and (budget.nodes is None or best.nodes <= budget.nodes)
    )
    return {
        "optimum": "solved",
        "opt_s": best.seconds,
        "variables": best.variables,
        "rows": best.constraints,
        "nodes": best.nodes,
        "opt_cpu": cpu,
        "operator": within,
    }


def _padding(engine: Any, done: Any, space: StateSpace) -> dict[str, Any]:
    scope = {"partial_drafts": True, "prefix_caching": space.prefix_caching}
    before = decode_padding(engine, **scope).mean_blocks
    covered = decode_padding(done, **scope).mean_blocks
    start = time.process_time()
    refined = refine_padding(done, space, PADDING_BOUND * before)
    cpu = time.process_time() - start
    exact = decode_padding(refined.plan, **scope).mean_blocks
    extra = len(set(refined.plan.decode_buckets) - set(done.decode_buckets))
    return {
        "pad_engine": before,
        "pad_covered": covered,
        "pad_refined": exact,
        "refine_buckets": extra,
        "refine_s": decode_seconds(set(refined.plan.decode_buckets) - set(done.decode_buckets)),
        "refine_cpu": cpu,
        "refine_stop": refined.stopped,
    }


def _summary(rows: list[dict[str, Any]]) -> None:
    solved = [r for r in rows if r["optimum"] == "solved"]
    ratios = [r["greedy_s"] / r["opt_s"] for r in solved if r["opt_s"] > 0]
    print(f"\n{len(rows)} engines whose completion adds decode seeds; optimum solved on "
          f"{len(solved)}")  # fmt: skip
    if ratios:
        print(f"greedy / optimum: mean {statistics.mean(ratios):.3f}, worst {max(ratios):.3f}, "
              f"at the optimum in {sum(r < 1 + 1e-9 for r in ratios)}")  # fmt: skip
    groups: dict[tuple[str, int], list[float]] = defaultdict(list)
    for r in solved:
        if r["opt_s"] > 0:
            groups[r["strategy"], r["k"]].append(r["greedy_s"] / r["opt_s"])
    for (strategy, k), values in sorted(groups.items()):
        print(f"  {strategy} k={k}: n {len(values)}, mean {statistics.mean(values):.3f}, "
              f"worst {max(values):.3f}")  # fmt: skip
    out = defaultdict(int)
    for r in rows:
        if r["optimum"] != "solved":
            out[r["strategy"], r["optimum"].split(":")[0]] += 1
    for (strategy, why), n in sorted(out.items()):
        print(f"  not solved: {strategy}: {why} ({n})")
    within = [r for r in solved if r["operator"]]
    print(
        f"within the operator's budget ({OPERATOR_BUDGET}): {len(within)} of {len(solved)}; "
        f"their solve CPU max {max((r['opt_cpu'] for r in within), default=0):.2f} s"
    )
    _padding_summary(rows)


def _padding_summary(rows: list[dict[str, Any]]) -> None:
    keys = ("pad_engine", "pad_covered", "pad_refined")
    means = [statistics.mean(r[k] for r in rows) for k in keys]
    print("mean decode KV padding, engine / completed / refined: "
          + " / ".join(f"{m:.3f}" for m in means))  # fmt: skip
    within = sum(r["pad_refined"] <= PADDING_BOUND * r["pad_engine"] + 1e-9 for r in rows)
    print(f"refined within {PADDING_BOUND}x of the engine's: {within} of {len(rows)}; worst "
          f"ratio {max(r['pad_refined'] / r['pad_engine'] for r in rows):.3f}; completed worst "
          f"{max(r['pad_covered'] / r['pad_engine'] for r in rows):.3f}")  # fmt: skip
    print(f"refinement adds {statistics.mean(r['refine_buckets'] for r in rows):.1f} decode "
          f"buckets on average (max {max(r['refine_buckets'] for r in rows)}), "
          f"{statistics.mean(r['refine_s'] for r in rows):.1f} s of warmup; completion added "
          f"{statistics.mean(r['greedy_s'] for r in rows):.1f} s; refinement CPU max "
          f"{max(r['refine_cpu'] for r in rows):.2f} s")  # fmt: skip


def examples() -> None:
    """Each example's completion under both objectives: source, buckets, seconds, padding."""
    from pathlib import Path

    from warmgate.api import engine_shape_config, load_manifest
    from warmgate.buckets.completion.choose import complete_choice
    from warmgate.reconcile.planning.proven_plan import PlanPolicy

    root = Path(__file__).resolve().parent.parent / "examples"
    for path in sorted(root.glob("*.yaml")):
        sdd = load_manifest(path)
        cfg = engine_shape_config(sdd, num_gpu_blocks=8192)
        policy = PlanPolicy.of(sdd)
        engine = plan_buckets(cfg)
        for objective in ("WarmupTime", "ServingSpeed"):
            start = time.process_time()
            try:
                done = complete_choice(cfg, policy.partial_drafts, policy.prefix_caching,
                                       objective)  # type: ignore[arg-type]  # fmt: skip
            except CompletionError as exc:
                print(f"{path.stem:<30} {objective:<12} completion failed: {exc}")
                break
            cpu = time.process_time() - start
            diff = plan_diff(engine, done.plan)
            pad = done.padding
            figures = "no decode bucket added"
            if pad is not None:
                figures = (
                    f"KV padding engine {pad.engine:.2f}x, completed {pad.covered:.2f}x, "
                    f"warmed {pad.warmed:.2f}x (+{pad.refined_buckets} decode, "
                    f"{pad.refined_s:.0f} s)"
                )
            print(f"{path.stem:<30} {objective:<12} {done.source:<7} +{len(diff.added_decode)} "
                  f"decode ({decode_seconds(diff.added_decode):.0f} s) {figures}; CPU {cpu:.2f} s; "
                  f"optimum: {done.optimum}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="engines with an optimum")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--csv", default=None, help="write every row here")
    parser.add_argument("--examples", action="store_true", help="the examples instead")
    args = parser.parse_args()
    if args.examples:
        examples()
        return
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    drawn = trivial = refused = 0
    while sum(r["optimum"] == "solved" for r in rows) < args.count:
        cfg, sharing = draw(rng)
        drawn += 1
        try:
            row = measure(cfg, sharing)
        except (ValueError, CompletionError):  # the engine refuses the config, or no fixed point
            refused += 1
            continue
        if row is None:
            trivial += 1
            continue
        rows.append(row)
        print(_line(row), flush=True)
    print(f"\ndrawn {drawn}: {trivial} need no decode seed, {refused} refused by the planner")
    _summary(rows)
    if args.csv:
        with open(args.csv, "w", newline="") as out:
            writer = csv.DictWriter(out, fieldnames=sorted({k for r in rows for k in r}))
            writer.writeheader()
            writer.writerows(rows)


def _line(r: dict[str, Any]) -> str:
    ratio = f"{r['greedy_s'] / r['opt_s']:.3f}" if r.get("opt_s") else "-"
    opt = f"{r['opt_s']:.1f}" if "opt_s" in r else r["optimum"]
    return (
        f"{r['strategy']} k={r['k']} b={r['block']} {r['profile']:<12} sharing={r['sharing']!s:<5} "
        f"{r['engine']:<32} greedy {r['greedy_s']:6.1f} s opt {opt} ratio {ratio} "
        f"vars {r.get('variables', '-')} nodes {r.get('nodes', '-')} cpu {r['opt_cpu']:.2f} "
        f"work {r['work']} | pad {r['pad_engine']:.2f} -> {r['pad_covered']:.2f} -> "
        f"{r['pad_refined']:.2f} (+{r['refine_buckets']})"
    )


if __name__ == "__main__":
    sys.exit(main())
