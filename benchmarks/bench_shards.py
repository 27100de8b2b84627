"""Issue 38's figures: per example, the single-process warmup estimate against the sharded one at
N = 2, 4 and 8 engine processes (each with the engine's TP cards), the slicing's balance, the
goal's ratio (sharded wall over single-process / N; the goal is 1.2x at most), the decode graphs
more than one engine compiles, and how long the slicing takes.

    .venv/bin/python benchmarks/bench_shards.py

Estimates only (warmgate/buckets/cost.py, the high bound; the drafter's direct warmup included
where the plan has one); nothing ran on Gaudi. Engine start-up (loading the model, once per
shard) is in neither the single nor the sharded figure.
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets.cost import format_span
from warmgate.buckets.shard import max_shards, slice_plan
from warmgate.reconcile.planning.evaluate import evaluate

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))


def main() -> None:
    print(
        f"{'example':<30}{'TP':>3}{'graphs':>7}{'max':>5}  {'single':<14}"
        f"{'N':>2}{'cards':>6}  {'sharded':<14}{'x single/N':>11}{'balance':>9}{'dup':>5}{'ms':>7}"
    )
    for path in EXAMPLES:
        sdd = SpecDecodeDeployment.model_validate(yaml.safe_load(path.read_text()))
        result = evaluate(sdd)
        bundle = result.to_run(None)
        if bundle is None or result.evaluation is None:
            print(f"{path.stem:<30} no plan to warm")
            continue
        plan = bundle.buckets
        drafter = bundle.drafter_warmup.shapes if bundle.drafter_warmup is not None else ()
        tp = sdd.spec.engine.tensor_parallel_size
        graphs = len(plan.prompt_buckets) + len(plan.decode_buckets) + len(drafter)
        first = True
        for n in (2, 4, 8):
            head = (
                f"{path.stem:<30}{tp:>3}{graphs:>7}{max_shards(plan):>5}  " if first else " " * 47
            )
            if n > max_shards(plan):
                print(f"{head}{'':<14}{n:>2}  refused: every engine needs a prompt bucket")
                first = False
                continue
            start = time.perf_counter()
            sp = slice_plan(plan, n, drafter=drafter, model=result.evaluation.model)
            ms = (time.perf_counter() - start) * 1000
            single = format_span(sp.single_low_s, sp.single_high_s) if first else ""
            print(
                f"{head}{single:<14}{n:>2}{n * tp:>6}  {format_span(*sp.wall_s):<14}"
                f"{sp.speedup_goal_ratio:>10.3f}x{sp.balance:>9.3f}{sp.duplicated:>5}{ms:>7.0f}"
            )
            first = False


if __name__ == "__main__":
    main()
