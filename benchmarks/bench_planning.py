"""The operator's planner on a burst: `planning.evaluate` over the scale run's distinct inputs.

Run: .venv/bin/python benchmarks/bench_planning.py [--repeat 3] [--write FILE | --check FILE]
    [--stages] [--threads N]
It builds the objects of bench_operator_scale.py's 1,000-object run (`manifests(1000, "ns")`),
keeps one per distinct planner input (334), parses them as the operator does and times
`warmgate.reconcile.planning.evaluate.evaluate` over all of them: process CPU time, best of
``--repeat``.
``--write FILE`` stores a fingerprint of every result (plans, proofs, completion, drafter sweep,
verdicts and summary as canonical JSON, one line per input); ``--check FILE`` compares against
it, so an optimisation of the planner can show that no result changed.
``--stages`` also times, per input, what the operator does with a fresh result besides
`evaluate`: the plan cache's size walk (`deep_size`), the first `to_run` (the drafter sweep read
back and the direct warmup's shape set, both kept with the result) and `desired_children`.
``--threads N`` plans every input once more in N threads, as the operator's N sync workers do,
and prints the sum of each `evaluate`'s wall time (what `warmgate_plan_duration_seconds_sum`
adds up) beside the process CPU: with the GIL, a thread's wall time counts the other threads'.
Run it with a checkout's code on PYTHONPATH to measure that checkout (an A/B on one machine).
Prints figures only.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import manifests

from warmgate.api import SpecDecodeDeployment, parse_manifest
from warmgate.buckets import CoverageReport
from warmgate.buckets.completion.choose import complete_choice
from warmgate.reconcile.planning.evaluate import PlanningInputs, PlanningResult, evaluate
from warmgate.reconcile.planning.planning_cache import deep_size
from warmgate.resources import desired_children
from warmgate.settings import Settings


def distinct_inputs(n: int) -> list[SpecDecodeDeployment]:
    """One parsed object per distinct planner input (`PlanningInputs.digest`), in manifest order."""
    seen: dict[str, SpecDecodeDeployment] = {}
    for doc in manifests(n, "ns"):
        sdd = parse_manifest(doc)
        seen.setdefault(PlanningInputs.of(sdd).digest, sdd)
    return list(seen.values())


def fingerprint(result: PlanningResult) -> str:
    """Everything a result holds, as canonical JSON (equal text: equal results)."""
    doc: dict[str, Any] = {
        "planned": repr(result.planned),
        "coverage": repr(result.coverage),
        "refused": repr(result.refused),
        "stalled": result.stalled,
        "may_warm": result.may_warm,
        "summary": None if result.summary is None else result.summary.model_dump(mode="json"),
        "plan": None if result.plan is None else _plan(result.plan),
    }
    evaluation = result.evaluation
    if evaluation is not None:
        drafter = evaluation.drafter
        doc["evaluation"] = {
            "engine_plan": _plan(evaluation.engine_plan),
            "report": evaluation.report.to_dict(),
            "completed": None if evaluation.completed is None else _plan(evaluation.completed),
            "completion_error": evaluation.completion_error,
            "unwarmable": _report(evaluation.unwarmable),
            "diff": repr(evaluation.diff),
            "effective_report": evaluation.effective_report.to_dict(),
            "drafter": {
                "method": drafter.method,
                "error": drafter.error,
                "report": None if drafter.report is None else drafter.report.to_dict(),
                "sweep": None if drafter.sweep is None else drafter.sweep.spec.to_json(),
                "status": drafter.status_line(),
            },
            "cost": repr(evaluation.cost(evaluation.effective)),
            "completion": None
            if evaluation.completion is None
            else evaluation.completion.to_dict(),
        }
        run = result.to_run(None)
        doc["to_run"] = None if run is None else repr(run.known_unwarmable)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), default=repr)


def _report(report: CoverageReport | None) -> dict[str, Any] | None:
    return None if report is None else report.to_dict()


def _plan(plan: Any) -> dict[str, Any]:
    return plan.to_dict() | {"skipped": [list(s) for s in plan.skipped_file_lines]}


def time_all(sdds: list[SpecDecodeDeployment], repeat: int) -> tuple[float, list[PlanningResult]]:
    """The best process CPU time of evaluating every input, and the last run's results."""
    best = math.inf
    results: list[PlanningResult] = []
    for _ in range(repeat):
        complete_choice.cache_clear()  # each repeat plans as a fresh operator process would
        start = time.process_time()
        results = [evaluate(sdd) for sdd in sdds]
        best = min(best, time.process_time() - start)
    return best, results


def time_stages(sdds: list[SpecDecodeDeployment], repeat: int) -> dict[str, float]:
    """Per stage, the best process CPU seconds over ``repeat`` runs of every input."""
    settings = Settings(operator_image="warmgate:bench")
    best: dict[str, float] = {}
    for _ in range(repeat):
        complete_choice.cache_clear()
        spent = dict.fromkeys(("evaluate", "deep_size", "first to_run", "desired_children"), 0.0)
        for i, parsed in enumerate(sdds):
            meta = parsed.metadata.model_copy(update={"uid": f"uid-{i}", "namespace": "bench"})
            sdd = parsed.model_copy(update={"metadata": meta})
            marks = [time.process_time()]
            result = evaluate(sdd)
            marks.append(time.process_time())
            deep_size(result)
            marks.append(time.process_time())
            run = result.to_run(None)
            marks.append(time.process_time())
            if run is not None:
                desired_children(sdd, run, settings)
            marks.append(time.process_time())
            for name, begin, end in zip(spent, marks, marks[1:], strict=False):
                spent[name] += end - begin
        best = {k: min(best.get(k, math.inf), v) for k, v in spent.items()}
    return best


def time_threads(sdds: list[SpecDecodeDeployment], threads: int) -> tuple[float, float, float]:
    """Every input planned in ``threads`` threads: (sum of the plannings' wall times, wall time
    of the whole run, process CPU)."""
    complete_choice.cache_clear()
    walls: list[float] = []
    lock = threading.Lock()

    def timed(sdd: SpecDecodeDeployment) -> None:
        began = time.perf_counter()
        evaluate(sdd)
        with lock:
            walls.append(time.perf_counter() - began)

    cpu, began = time.process_time(), time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(timed, sdds))
    return sum(walls), time.perf_counter() - began, time.process_time() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stages", action="store_true", help="time the stages after evaluate")
    parser.add_argument("--threads", type=int, default=0, help="plan again in N threads")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path, help="store every result's fingerprint")
    group.add_argument("--check", type=Path, help="compare every result's fingerprint")
    args = parser.parse_args()
    sdds = distinct_inputs(args.objects)
    seconds, results = time_all(sdds, args.repeat)
    lines = [fingerprint(r) for r in results]
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()
    print(f"configs: {len(sdds)}")
    print(f"planning CPU s (best of {args.repeat}): {seconds:.2f}")
    print(f"per config ms: {1000 * seconds / len(sdds):.1f}")
    print(f"fingerprint: {digest[:16]}")
    if args.stages:
        stages = time_stages(sdds, args.repeat)
        print(
            f"stages CPU s (best of {args.repeat}): "
            + ", ".join(f"{k} {v:.2f}" for k, v in stages.items())
            + f"; all {sum(stages.values()):.2f}"
        )
    if args.threads > 0:
        summed, wall, cpu = time_threads(sdds, args.threads)
        print(
            f"in {args.threads} threads: plannings' wall times summed {summed:.1f} s, "
            f"run wall {wall:.1f} s, process CPU {cpu:.1f} s, summed / CPU {summed / cpu:.1f}"
        )
    if args.write is not None:
        args.write.write_text("\n".join(lines) + "\n")
    if args.check is not None:
        expected = args.check.read_text().splitlines()
        differ = [i for i, (a, b) in enumerate(zip(expected, lines, strict=False)) if a != b]
        if len(expected) != len(lines) or differ:
            print(f"fingerprint MISMATCH: {len(differ)} results differ, e.g. {differ[:5]}")
            return 1
        print("fingerprint: identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
