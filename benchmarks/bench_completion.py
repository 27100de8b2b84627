"""Completion against the exact optimum (issue 15): the ratio table, padding, and timings.

Prints, for small engines across strategies, k 1..4, prefix caching on/off and both profiles,
the estimated warmup seconds of the decode buckets each completion adds (midpoint of the cost
model, 8B BF16) and its ratio to the optimum solved by HiGHS; then completion times and sizes on
the reference doc's configs and the examples. Needs the dev extra (highspy).
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import config

from warmgate.api import engine_shape_config, load_manifest
from warmgate.buckets import EngineShapeConfig, complete_plan, plan_buckets, plan_diff
from warmgate.buckets.completion.complete import UnwarmableError
from warmgate.buckets.completion.optimum import OptimumUnavailable, optimal_seeds
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.coverage.padding import decode_padding

# (max_num_seqs, max_model_len, max_num_batched_tokens, KV blocks), block 128.
SMALL = {"tiny": (8, 1024, 256, 48), "small": (16, 2048, 512, 160)}
DOC = {
    "A": (64, 4096, 2048, 8192),
    "B": (128, 8192, 8192, 8192),
    "C": (256, 32768, 8192, 8192),
    "D": (128, 32768, 2048, 2000),
}
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _cfg(values: tuple[int, int, int, int], k: int, **extra: Any) -> EngineShapeConfig:
    # ngram: this benchmark is about decode seeds; a draft model can leave prefills no prompt
    # bucket serves (docs/coverage.md), which does not change the decode additions.
    return config(values, k, speculative_method="ngram", **extra)


def _completion(cfg: EngineShapeConfig, sharing: bool | None, cheapest: bool) -> dict[str, Any]:
    before = plan_buckets(cfg)
    start = time.perf_counter()
    try:
        done = complete_plan(cfg, prefix_caching=sharing, cheapest=cheapest)
    except UnwarmableError as caught:  # prefills no bucket serves: its plan covers every decode
        done = caught.plan
    seconds = time.perf_counter() - start
    diff = plan_diff(before, done)
    return {
        "decode": len(diff.added_decode),
        "cost": decode_seconds(diff.added_decode),
        "pad": decode_padding(done, prefix_caching=sharing),
        "time": seconds,
        "total": len(done.decode_buckets),
    }


def _ratio(cost: float, best: float) -> float:
    return cost / best if best else 1.0


def ratio_table() -> None:
    """The issue's table: completion / optimum, before (issue 4) and after (issue 15)."""
    print("decode completion vs the exact optimum (partial drafts on; est. s = midpoint, 8B BF16)")
    print(
        f"{'cfg':<6}{'profile':<13}{'strat':<6}{'k':>2}{'pc':>4}{'D':>5}"
        f"{'opt +D':>8}{'opt s':>7}{'old +D':>8}{'old s':>7}{'old/opt':>8}"
        f"{'new +D':>8}{'new s':>7}{'new/opt':>8}{'KV mean e/old/new/opt':>24}{'new t':>7}"
    )
    old_r: list[float] = []
    new_r: list[float] = []
    for name, values in SMALL.items():
        for profile in ("v0.26.0", "main-2026-08"):
            for strategy in ("exp", "lin", "pad"):
                for k in (1, 2, 3, 4):
                    for sharing in (True, False):
                        row = _row(_cfg(values, k, strategy=strategy, profile=profile), sharing)
                        if row is None:
                            continue
                        old_r.append(row["old_ratio"])
                        new_r.append(row["new_ratio"])
                        print(
                            f"{name:<6}{profile:<13}{strategy:<6}{k:>2}{sharing!s:>5.1}{row['text']}"
                        )
    for label, ratios in (("old", old_r), ("new", new_r)):
        print(
            f"{label}: completion/optimum mean {statistics.mean(ratios):.3f}, "
            f"worst {max(ratios):.3f}, at optimum {sum(r < 1.0005 for r in ratios)}/{len(ratios)}"
        )


def _row(cfg: EngineShapeConfig, sharing: bool) -> dict[str, Any] | None:
    engine = plan_buckets(cfg)
    try:
        best = optimal_seeds(cfg, prefix_caching=sharing)
    except OptimumUnavailable as exc:
        print(f"  optimum not computed: {exc}", file=sys.stderr)
        return None
    old, new = _completion(cfg, sharing, False), _completion(cfg, sharing, True)
    pads = [decode_padding(engine, prefix_caching=sharing), old["pad"], new["pad"]]
    pads.append(decode_padding(best.plan, prefix_caching=sharing))
    kv = "/".join(f"{p.mean_blocks:.2f}" for p in pads)
    old_ratio, new_ratio = _ratio(old["cost"], best.seconds), _ratio(new["cost"], best.seconds)
    text = (
        f"{len(engine.decode_buckets):>4}{len(best.decode):>8}{best.seconds:>7.1f}"
        f"{old['decode']:>8}{old['cost']:>7.1f}{old_ratio:>8.2f}"
        f"{new['decode']:>8}{new['cost']:>7.1f}{new_ratio:>8.2f}{kv:>24}{new['time']:>7.3f}"
    )
    return {"old_ratio": old_ratio, "new_ratio": new_ratio, "text": text}


def doc_configs() -> None:
    """The doc configs: decode buckets after completion over the engine's own count."""
    print("\nreference configs (exp, prefix caching on): decode buckets, completed / engine")
    print(f"{'cfg':<4}{'k':>2}{'engine D':>9}{'old D':>7}{'x':>6}{'new D':>7}{'x':>6}"
          f"{'old s':>8}{'new s':>8}{'old t':>7}{'new t':>7}")  # fmt: skip
    for name, values in DOC.items():
        for k in (1, 2, 3, 4):
            cfg = _cfg(values, k)
            engine = len(plan_buckets(cfg).decode_buckets)
            old, new = _completion(cfg, None, False), _completion(cfg, None, True)
            print(
                f"{name:<4}{k:>2}{engine:>9}{old['total']:>7}{old['total'] / engine:>6.2f}"
                f"{new['total']:>7}{new['total'] / engine:>6.2f}{old['cost']:>8.1f}"
                f"{new['cost']:>8.1f}{old['time']:>7.3f}{new['time']:>7.3f}"
            )


def examples() -> None:
    """Completion time and result on every example manifest (8192 KV blocks where unpinned)."""
    print("\nexamples: completion time (best of 3) and added decode buckets, old -> new")
    for path in sorted(EXAMPLES.glob("*.yaml")):
        sdd = load_manifest(path)
        cfg = engine_shape_config(sdd, num_gpu_blocks=8192)
        sharing = sdd.spec.engine.enable_prefix_caching
        runs = [[_completion(cfg, sharing, c) for _ in range(3)] for c in (False, True)]
        old, new = (min(r, key=lambda x: x["time"]) for r in runs)
        print(
            f"  {path.stem:<32} old {old['time']:.3f} s +{old['decode']:<3} ({old['cost']:.0f} s) "
            f"new {new['time']:.3f} s +{new['decode']:<3} ({new['cost']:.0f} s); "
            f"KV mean {old['pad'].mean_blocks:.2f} -> {new['pad'].mean_blocks:.2f}"
        )


if __name__ == "__main__":
    ratio_table()
    doc_configs()
    examples()
