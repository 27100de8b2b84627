"""The drafter sweep under vLLM's real scheduler, prefix caching on and off (issue 21, part 4).

The runner drives the sweeps warmgate planned for the tiny engine's limits (tiny.py: 4
sequences, 512 tokens, 256 a step; conftest.RUNS: eagle3 k=2 on 128-token blocks with prefix
caching, eagle k=3 on 64-token blocks without) through the real server, with the scheduler
recorder loaded (sched_recorder.py). sweep_compare.py checks each planned step's
assumptions against the steps the scheduler formed and maps them through the plan's lookups to
the drafter graphs a Gaudi engine would have run. The figures (how many steps formed as planned)
are printed and go to docs/testing.md.
"""

from __future__ import annotations

import pytest
from realengine import tiny
from realengine.conftest import RUNS, RunnerRuns, record
from realengine.sweep_compare import Comparison, StepCheck, summary
from support.resource_cases import planned


def compare(runs: RunnerRuns, name: str) -> list[StepCheck]:
    run = runs[name]
    assert run.summary.get("outcome") == "cpu_engine", run.summary
    plan = planned(tiny.tiny_sdd(**RUNS[name])).buckets
    pc = bool(RUNS[name]["prefix_caching"])
    checks = Comparison(run.plan, plan, run.steps(), pc).checks()
    record(f"sweep under the real scheduler, {name}: {summary(checks)}", 0.0)
    for check in checks:
        record(f"  {check.line()}", 0.0)
    return checks


@pytest.mark.parametrize("name", ["prefix-caching-on", "prefix-caching-off"])
def test_every_planned_sweep_step_formed_as_planned(runner_runs: RunnerRuns, name: str) -> None:
    checks = compare(runner_runs, name)
    assert len(checks) == len(runner_runs[name].plan["drafter_sweep"]["steps"]) > 0
    print(summary(checks))
    for check in checks:
        print(check.line())
    assert [c.line() for c in checks if not c.formed] == []


def test_the_comparison_can_fail(runner_runs: RunnerRuns) -> None:
    """The control: the same records read against a plan whose steps expect a graph nothing
    runs, or with one request missing, are not formed as planned."""
    run = runner_runs["prefix-caching-on"]
    doc = run.plan
    step = dict(doc["drafter_sweep"]["steps"][0])
    step["expected"] = [*step["expected"], ["decode", 1, 1, 999]]
    wrong = {**doc, "drafter_sweep": {**doc["drafter_sweep"], "steps": [step]}}
    plan = planned(tiny.tiny_sdd(**RUNS["prefix-caching-on"])).buckets
    (check,) = Comparison(wrong, plan, run.steps(), True).checks()
    assert check.failures == ["expected graph ('decode', 1, 1, 999) did not run"]
    lines = run.steps()
    victim = next(rid for line in lines for rid in line["new"])
    dropped = [
        {**line, "new": {r: v for r, v in line["new"].items() if r != victim}} for line in lines
    ]
    first = Comparison(doc, plan, dropped, True).checks()
    assert any("requests reached the scheduler" in f for c in first for f in c.failures)
