"""The drafter sweep end to end on the stand-in engine (a test double), and the planning stage
with the drafter stage in it (issue 16, phase 2).

Prints, per plan: the sweep's steps and requests, its seconds on the stand-in, the probe's,
the whole runner run, and what the compile hook saw. The stand-in's engine steps take half a
millisecond and its graphs compile instantly, so these are the harness's figures, not Gaudi's:
the estimate column is the cost model's assumed Gaudi time for the same sweep.

    .venv/bin/python benchmarks/bench_sweep_standin.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "doubles"), str(ROOT / "tests")]
import runner_harness  # noqa: E402
from support.resource_cases import make_case  # noqa: E402

from warmgate.api import load_manifest  # noqa: E402
from warmgate.reconcile.planning.evaluate import evaluate  # noqa: E402


def _standin_doc(doc: dict[str, Any], tmp: Path) -> dict[str, Any]:
    """An operator-built runner plan with the engine, paths and port of this machine."""
    doc["engine"]["command"] = [sys.executable, str(runner_harness.STANDIN), "serve"]
    doc["engine"]["port"] = runner_harness.free_port()
    doc["cache"] |= {"volume_dir": str(tmp / "volume"), "local_dir": str(tmp / "l/r")}
    doc["report"] = {"termination_log": str(tmp / "termination-log")}
    doc["work_dir"] = str(tmp / "work")
    doc["require_device"] = False
    doc["timeouts"] = {"total_s": 600, "startup_s": 120, "probe_s": 300, "stop_grace_s": 10}
    doc["timeouts"]["sweep_s"] = 300
    return doc


def _run(name: str, doc: dict[str, Any], tmp: Path) -> None:
    began = time.monotonic()
    result = runner_harness.run_runner(tmp, doc)
    total = time.monotonic() - began
    report = result.report(doc["cache"]["key"])
    sweep = doc.get("drafter_sweep") or {"steps": [], "seconds": [0, 0]}
    steps = sweep["steps"]
    drafter = report.get("drafter") or {}
    timings = report["timings"]
    low, high = sweep["seconds"]
    compiled = f"{drafter.get('compiled', '-')}/{drafter.get('expected', '-')}"
    print(
        f"| {name} | {len(steps)} | {sum(s['concurrency'] for s in steps)} | "
        f"{timings.get('sweep_s', 0):.1f} s | {timings.get('probe_s', 0):.1f} s | {total:.1f} s | "
        f"{result.summary['outcome']} | {compiled} | {len(drafter.get('probe_known_gaps', []))} | "
        f"{low:.0f}-{high:.0f} s |"
    )


def main() -> None:
    print("planning stage, warm, best of 3 (evaluate: plan, proof, completion, drafter, sweep)")
    for path in sorted((ROOT / "examples").glob("*.yaml")):
        sdd = load_manifest(path)
        evaluate(sdd)
        best = min(_timed(lambda s=sdd: evaluate(s)) for _ in range(3))
        drafter = evaluate(sdd).evaluation
        line = drafter.drafter.status_line() if drafter else ""
        print(f"  {path.stem:32} {best * 1000:7.0f} ms  {line or 'no drafter'}")
    print()
    print(
        "| plan | sweep steps | requests | sweep | probe | runner | outcome | compiled/planned"
        " | known gaps in probe | Gaudi estimate |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        issue = Path(tmp) / "issue"
        issue.mkdir()
        _run("issue 16 (8, 4096, 2048), eagle3 k=3", runner_harness.make_drafter_plan(issue), issue)
        for path in sorted((ROOT / "examples").glob("*.yaml")):
            case = make_case(path)
            if "drafter_sweep" not in case.children().runner_plan:
                continue
            work = Path(tmp) / path.stem
            work.mkdir()
            _run(path.stem, _standin_doc(case.children().runner_plan, work), work)


def _timed(call: Any) -> float:
    began = time.perf_counter()
    call()
    return time.perf_counter() - began


if __name__ == "__main__":
    main()
