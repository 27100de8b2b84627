"""Benchmark the planning stage against plan size: the count, the whole evaluate, the refusal.

Prints, for `lin` configurations of growing size, the bucket count estimated without
generating the buckets (`proven_plan.plan_size`), the exact count, the wall time of the
estimate and of the operator's whole planning stage (`planning.evaluate`: plan, proof,
completion, cost), and what the operator decides. MAX_PLAN_BUCKETS refuses a plan before
planning it; the figures show what planning costs below it and that the refusal of issue 11's
example (lin, maxNumSeqs 1024, maxModelLen 131072) takes milliseconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from warmgate.api import engine_shape_config, parse_manifest
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.proven_plan import MAX_PLAN_BUCKETS, plan_size, total_buckets

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "minimal-ngram.yaml"
# (maxModelLen, maxNumSeqs): lin, maxNumBatchedTokens 8192, k=2.
SIZES = [(8192, 64), (16384, 128), (32768, 256), (65536, 512), (131072, 1024)]


def _sdd(mml: int, mns: int) -> Any:
    doc = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    doc["metadata"] = {"name": "bench", "namespace": "bench", "uid": "u", "generation": 1}
    doc["spec"]["engine"] = {"maxModelLen": mml, "maxNumSeqs": mns, "maxNumBatchedTokens": 8192}
    doc["spec"]["buckets"] = {"strategy": "lin"}
    doc["spec"]["warmup"] = {"timeoutSeconds": 86400}
    return parse_manifest(doc)


def _median(fn: Any, repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - began)
    return statistics.median(times), result


def main() -> int:
    print(f"MAX_PLAN_BUCKETS = {MAX_PLAN_BUCKETS:,}")
    print("| lin mml / mns | estimate (low-high) | exact | estimate time | evaluate | decision |")
    print("|---|---|---|---|---|---|")
    for mml, mns in SIZES:
        sdd = _sdd(mml, mns)
        config = engine_shape_config(sdd)
        est_s, size = _median(lambda c=config: plan_size(c), 5)
        eval_s, result = _median(lambda s=sdd: evaluate(s), 1 if size.low > 10_000 else 3)
        exact = f"{total_buckets(result.plan):,}" if result.plan is not None else "not planned"
        decision = result.refused.reason if result.refused else result.planned.reason
        print(
            f"| {mml} / {mns} | {size.low:,}-{size.high:,} | {exact} | {est_s * 1e3:.2f} ms "
            f"| {eval_s:.2f} s | {decision} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
