"""Drafter-graph prover against brute force, its time on big configs, and the sweep planner's."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from common import best_of, config

from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import plan_sweep

# The brute force is the tests' engine-call simulator (tests/unit/buckets/drafter/drafter_sim.py).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "unit" / "buckets"))
from drafter_sim import brute_force_drafter

# The reference doc's configs (section 6), block 128, prompt bs max 1, exp.
DOC = {
    "A": (64, 4096, 2048, 8192),
    "B": (128, 8192, 8192, 8192),
    "C": (256, 32768, 8192, 8192),
    "D": (128, 32768, 2048, 2000),
    "issue": (8, 4096, 2048, None),
    "big": (256, 131072, 8192, None),
}
# Small enough for brute force (it enumerates every sequence's tokens, drafts and acceptances).
SMALL = {
    "tiny": (4, 256, 128, 32, 40),
    "small": (8, 512, 256, 32, None),
    "narrow": (6, 1024, 512, 64, 60),
}


def versus_brute_force() -> None:
    print("drafter prover vs brute force (partial drafts, engine-default prefix caching, eagle3)")
    print(f"{'config':<8}{'k':>3}{'shapes':>8}{'prover s':>10}{'brute s':>10}{'ratio':>8}  agree")
    for name, (mns, mml, mbt, block, kv) in SMALL.items():
        for k in (2, 3):
            cfg = EngineShapeConfig(
                max_num_seqs=mns,
                max_model_len=mml,
                max_num_batched_tokens=mbt,
                block_size=block,
                num_gpu_blocks=kv,
                num_speculative_tokens=k,
            )
            plan = plan_buckets(cfg)
            report = prove_drafter(plan, "eagle3")
            fast_s = best_of(lambda p=plan: prove_drafter(p, "eagle3"), 5)  # type: ignore[misc]
            start = time.perf_counter()
            slow = brute_force_drafter(plan, report.space)
            slow_s = time.perf_counter() - start
            agree = {s.key: (set(s.calls), s.full_drafts) for s in report.shapes} == slow
            print(
                f"{name:<8}{k:>3}{len(report.shapes):>8}{fast_s:>10.4f}{slow_s:>10.2f}"
                f"{slow_s / fast_s:>8.0f}  {'yes' if agree else 'NO'}"
            )


def doc_configs() -> None:
    print("\nprove_drafter and plan_sweep (budget 1 h) on the doc's configs, eagle3")
    print(
        f"{'cfg':<6}{'k':>2}{'shapes':>8}{'unwarmed':>10}{'prove s':>9}"
        f"{'driven':>8}{'steps':>7}{'sweep s':>9}{'sweep est.':>16}"
    )
    for name, values in DOC.items():
        for k in (1, 2, 3, 4):
            plan = plan_buckets(config(values, k))
            report = prove_drafter(plan, "eagle3")
            prove_s = best_of(lambda p=plan: prove_drafter(p, "eagle3"), 3)  # type: ignore[misc]
            start = time.perf_counter()
            sweep = plan_sweep(plan, report, budget_s=3600.0)
            sweep_s = time.perf_counter() - start
            low, high = sweep.seconds
            print(
                f"{name:<6}{k:>2}{len(report.shapes):>8}{len(report.unwarmed):>10}{prove_s:>9.3f}"
                f"{sweep.spec.driven:>8}{len(sweep.spec.steps):>7}{sweep_s:>9.2f}"
                f"{f'{low:.0f}-{high:.0f} s':>16}"
            )


def worst_strategy() -> None:
    print("\nlin on the big config (65k prompt buckets), k=4")
    plan = plan_buckets(config(DOC["big"], 4, strategy="lin"))
    seconds = best_of(lambda: prove_drafter(plan, "eagle3"), 1)
    report = prove_drafter(plan, "eagle3")
    shapes, unwarmed = len(report.shapes), len(report.unwarmed)
    print(f"  {shapes} drafter shapes, {unwarmed} unwarmed: {seconds:.2f} s")


if __name__ == "__main__":
    versus_brute_force()
    doc_configs()
    worst_strategy()
