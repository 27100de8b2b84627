"""What one sync pays to build an object's children from its (cached) planning result.

Run: .venv/bin/python benchmarks/bench_children.py [--repeat 200]
For each example manifest: `PlanningResult.to_run` (the plan bundle, with the drafter sweep as
the runner reads it, read once per planning result) and `desired_children` (the warmup order,
plan.json's text, the Job, the serving Deployment), each the mean over ``--repeat`` calls on one
warm planning result, as every sync of every object sharing that result makes them. The planner
builds the sweep in the runner's own type, so nothing is read back. Prints figures only.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial

from common import REPO

from warmgate.api import load_manifest
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.resources import desired_children
from warmgate.settings import Settings


def mean_ms(func: Callable[[], object], repeat: int) -> float:
    began = time.perf_counter()
    for _ in range(repeat):
        func()
    return (time.perf_counter() - began) / repeat * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    settings = Settings(operator_image="warmgate:bench")
    head = f"{'example':34} {'sweep steps':>11} {'to_run':>9} {'children':>9}"
    print(head + "  (ms)")
    for path in sorted((REPO / "examples").glob("*.yaml")):
        sdd = load_manifest(path)
        meta = sdd.metadata.model_copy(update={"uid": "uid-bench", "namespace": "bench"})
        sdd = sdd.model_copy(update={"metadata": meta})
        result = evaluate(sdd)
        bundle = result.to_run(kv_blocks=None)
        if bundle is None:
            print(f"{path.stem:34} (nothing may warm)")
            continue
        steps = len(bundle.drafter_sweep.steps) if bundle.drafter_sweep else 0
        to_run = mean_ms(partial(result.to_run, kv_blocks=None), args.repeat)
        children = mean_ms(partial(desired_children, sdd, bundle, settings), args.repeat)
        print(f"{path.stem:34} {steps:>11} {to_run:>9.3f} {children:>9.3f}")


if __name__ == "__main__":
    main()
