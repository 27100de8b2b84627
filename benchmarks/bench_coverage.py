"""Coverage prover speed against brute force, the big-config time, and completion of configs A-D."""

from __future__ import annotations

import time

from common import best_of, config

from warmgate.buckets import (
    EngineShapeConfig,
    brute_force_coverage,
    complete_plan,
    estimate_buckets,
    plan_buckets,
    plan_diff,
    prove_coverage,
)
from warmgate.buckets.completion.complete import UnwarmableError

# The reference doc's configs (section 6), block 128, prompt bs max 1, exp, HEAD-era inputs.
DOC = {
    "A": (64, 4096, 2048, 8192),
    "B": (128, 8192, 8192, 8192),
    "C": (256, 32768, 8192, 8192),
    "D": (128, 32768, 2048, 2000),
}
# Small enough for brute force to finish in seconds.
SMALL = {
    "A": DOC["A"],
    "small-1": (32, 2048, 1024, 4096),
    "small-2": (16, 8192, 2048, 1000),
}


def versus_brute_force() -> float:
    """Print the side-by-side table; return brute force's seconds per state (largest run)."""
    rate = 0.0
    print("prover vs brute force (partial drafts, engine-default prefix caching)")
    print(f"{'config':<10}{'k':>3}{'states':>12}{'prover s':>11}{'brute s':>10}{'ratio':>9}  agree")
    for name, values in SMALL.items():
        for k in (0, 3):
            plan = plan_buckets(config(values, k))
            fast = prove_coverage(plan)
            slow_s = best_of(lambda p=plan: brute_force_coverage(p), 1)  # type: ignore[misc]
            slow = brute_force_coverage(plan)
            fast_s = best_of(lambda p=plan: prove_coverage(p), 5)  # type: ignore[misc]
            agree = fast.uncovered == slow.uncovered and fast.states == slow.states
            rate = max(rate, slow_s / slow.states)
            print(
                f"{name:<10}{k:>3}{fast.states:>12,}{fast_s:>11.4f}{slow_s:>10.2f}"
                f"{slow_s / fast_s:>9.0f}  {'yes' if agree else 'NO'}"
            )
    return rate


def big_config(rate: float) -> None:
    print("\nbig config: max_num_seqs 256, max_model_len 131072, block 128, k=4, mbt 8192")
    for profile in ("v0.26.0", "main-2026-08"):
        for blocks in (None, 16384):
            cfg = EngineShapeConfig(
                max_num_seqs=256,
                max_model_len=131072,
                max_num_batched_tokens=8192,
                num_gpu_blocks=blocks,
                num_speculative_tokens=4,
                profile=profile,
            )
            plan = plan_buckets(cfg)
            report = prove_coverage(plan)
            seconds = best_of(lambda p=plan: prove_coverage(p), 3)  # type: ignore[misc]
            print(
                f"  {profile:<13} KV blocks {blocks!s:>6}: {report.states:,} states "
                f"({report.decode_states:,} decode), {len(report.uncovered)} gaps, "
                f"{seconds:.3f} s (brute force at {rate * 1e6:.0f} us/state: "
                f"~{rate * report.states / 3600:.1f} h)"
            )


def lin_big_config() -> None:
    print("\nlin on the big config (16384 KV blocks): the strategy with the most rows")
    for profile in ("v0.26.0", "main-2026-08"):
        cfg = EngineShapeConfig(
            max_num_seqs=256,
            max_model_len=131072,
            max_num_batched_tokens=8192,
            num_gpu_blocks=16384,
            num_speculative_tokens=4,
            strategy="lin",
            profile=profile,
        )
        plan = plan_buckets(cfg)
        report = prove_coverage(plan)
        seconds = best_of(lambda p=plan: prove_coverage(p), 2)  # type: ignore[misc]
        print(
            f"  {profile:<13} {len(plan.prompt_buckets):,} prompt + {len(plan.decode_buckets):,} "
            f"decode buckets, {len(report.uncovered):,} gaps, {seconds:.2f} s"
        )


def completion() -> None:
    print("\ncompletion (partial drafts on; cost of the added buckets for 8B BF16, no cache)")
    print(
        f"{'cfg':<4}{'method':>7}{'k':>2}{'P':>5}{'D':>5}{'gaps':>6}{'+prompt':>9}{'+seeds':>8}"
        f"{'+decode':>9}{'added est.':>20}{'time s':>8}  left"
    )
    for name, values in DOC.items():
        for method in ("ngram", "eagle3"):
            for k in (1, 2, 3):
                _completion_row(name, method, config(values, k, speculative_method=method))


def _completion_row(name: str, method: str, cfg: EngineShapeConfig) -> None:
    plan = plan_buckets(cfg)
    gaps = len(prove_coverage(plan).uncovered)
    start = time.perf_counter()
    left = "covered"
    try:
        done = complete_plan(cfg)
    except UnwarmableError as caught:
        done = caught.plan
        worst = caught.report.uncovered[0]
        left = f"{caught.report.uncovered_states} unwarmable, e.g. {worst.example}"
    seconds = time.perf_counter() - start
    diff = plan_diff(plan, done)
    cost = estimate_buckets(diff.added_prompt, diff.added_decode, overhead=False)
    estimate = f"{cost.low_s:.0f}-{cost.high_s:.0f} s"
    print(
        f"{name:<4}{method:>7}{cfg.num_speculative_tokens:>2}{len(plan.prompt_buckets):>5}"
        f"{len(plan.decode_buckets):>5}{gaps:>6}{len(diff.added_prompt):>9}"
        f"{len(diff.added_seeds):>8}{len(diff.added_decode):>9}{estimate:>20}{seconds:>8.2f}"
        f"  {left}"
    )


if __name__ == "__main__":
    big_config(versus_brute_force())
    lin_big_config()
    completion()
