"""Benchmark the bucket planner: planning time of large configs and lookup throughput."""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

from warmgate.buckets import BucketPlan, EngineShapeConfig, plan_buckets

LONG = {"max_num_seqs": 256, "max_num_batched_tokens": 8192}
# (label, EngineShapeConfig fields): the largest practical configs per strategy.
PLANS: list[tuple[str, dict[str, Any]]] = [
    (
        "exp A mns64 mml4096 k=2",
        {"max_num_seqs": 64, "max_model_len": 4096, "num_speculative_tokens": 2},
    ),
    ("exp C mns256 mml32768 k=3", {**LONG, "max_model_len": 32768, "num_speculative_tokens": 3}),
    ("exp mns256 mml131072 k=4", {**LONG, "max_model_len": 131072, "num_speculative_tokens": 4}),
    (
        "exp mns256 mml131072 k=4 main",
        {**LONG, "max_model_len": 131072, "num_speculative_tokens": 4, "profile": "main-2026-08"},
    ),
    (
        "exp mns256 mml131072 k=4 cpa",
        {**LONG, "max_model_len": 131072, "num_speculative_tokens": 4, "contiguous_pa": True},
    ),
    (
        "exp mns1024 mml262144 k=4",
        {**LONG, "max_num_seqs": 1024, "max_model_len": 262144, "num_speculative_tokens": 4},
    ),
    ("lin mns256 mml32768 k=0", {**LONG, "max_model_len": 32768, "strategy": "lin"}),
    (
        "lin mns256 mml32768 k=3",
        {**LONG, "max_model_len": 32768, "strategy": "lin", "num_speculative_tokens": 3},
    ),
    (
        "pad mns256 mml32768 k=3",
        {**LONG, "max_model_len": 32768, "strategy": "pad", "num_speculative_tokens": 3},
    ),
]
DEFAULTS: dict[str, Any] = {"max_num_batched_tokens": 2048, "num_gpu_blocks": 8192}


def _timed(func: Callable[[], object], repeat: int) -> list[float]:
    """Wall-clock seconds of ``repeat`` calls."""
    out = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        out.append(time.perf_counter() - start)
    return out


def bench_plans(repeat: int) -> None:
    """Print planning time (median and min over fresh configs) and list sizes."""
    print(f"{'plan':34} {'median ms':>10} {'min ms':>8} {'prompt':>7} {'seeds':>6} {'decode':>7}")
    for label, fields in PLANS:
        cfg = EngineShapeConfig(**{**DEFAULTS, **fields})
        times = _timed(lambda cfg=cfg: plan_buckets(cfg), repeat)
        plan = plan_buckets(cfg)
        print(
            f"{label:34} {statistics.median(times) * 1e3:10.2f} {min(times) * 1e3:8.2f} "
            f"{len(plan.prompt_buckets):7} {len(plan.seed_decode_buckets):6} "
            f"{len(plan.decode_buckets):7}"
        )


def _steps(plan: BucketPlan, n: int, rng: random.Random) -> list[tuple[int, int, int]]:
    """Random realistic decode steps (num_seqs, total_blocks, tokens_per_seq)."""
    cfg = plan.config
    out = []
    for _ in range(n):
        seqs = rng.randint(1, cfg.max_num_seqs)
        blocks = rng.randint(seqs, seqs * cfg.max_blocks_per_seq)
        out.append((seqs, blocks, rng.randint(1, cfg.tokens_per_step)))
    return out


def _rate(
    call: Callable[[tuple[int, int, int]], object], items: list[tuple[int, int, int]]
) -> float:
    """Calls per second of ``call`` over ``items`` (best of 3 passes)."""
    best = min(_timed(lambda: [call(item) for item in items], 3))
    return len(items) / best


def bench_lookups(count: int) -> None:
    """Print lookups per second for decode_shape, find_decode_bucket and prompt_shape."""
    rng = random.Random(0)
    print(f"\n{'lookups on plan':34} {'decode_shape/s':>15} {'find_decode/s':>14} {'prompt/s':>10}")
    for label, fields in PLANS:
        plan = plan_buckets(EngineShapeConfig(**{**DEFAULTS, **fields}))
        cfg = plan.config
        steps = _steps(plan, count, rng)
        prompts = [
            (1, rng.randint(1, cfg.max_num_batched_tokens), rng.randint(0, cfg.max_blocks_per_seq))
            for _ in range(count)
        ]
        shape = _rate(lambda s, p=plan: p.decode_shape(*s), steps)
        find = _rate(lambda s, p=plan: p.find_decode_bucket(s[0], s[1]), steps)
        prompt = _rate(lambda q, p=plan: p.prompt_shape(*q), prompts)
        print(f"{label:34} {shape:15,.0f} {find:14,.0f} {prompt:10,.0f}")


def main() -> None:
    """Run both benchmarks."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=20, help="planning repetitions per config")
    parser.add_argument("--lookups", type=int, default=50_000, help="lookups per measurement")
    args = parser.parse_args()
    bench_plans(args.repeat)
    bench_lookups(args.lookups)


if __name__ == "__main__":
    main()
