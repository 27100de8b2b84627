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

from warmgate.warmup.hook.lines import parse_hook_line


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
    """Every assumption of every step held and every graph it expected ran. The arrival within
    two engine steps is the runner's burst gate's doing (hook/burst_gate.py): without it this
    CPU engine, its steps milliseconds long and its API server on the same 2 busy cores, saw a
    3-request burst reach the scheduler over 44 steps and the step's graphs never ran
    (docs/testing.md, "The sweep under the real scheduler")."""
    checks = compare(runner_runs, name)
    assert len(checks) == len(runner_runs[name].plan["drafter_sweep"]["steps"]) > 0
    print(summary(checks))
    for check in checks:
        print(check.line())
    assert [c.line() for c in checks if not c.formed] == []


@pytest.mark.parametrize("name", ["prefix-caching-on", "prefix-caching-off"])
def test_every_burst_the_runner_sent_entered_the_scheduler_whole(
    runner_runs: RunnerRuns, name: str
) -> None:
    """The engine hook's burst gate (hook/burst_gate.py) saw every burst of the probe and the
    sweep, and each went to vLLM's scheduler whole, never because its hold ran out; the
    report counts them the same."""
    run = runner_runs[name]
    report = run.report
    sent = len((report["probe"] or {}).get("steps", [])) + report["drafter"]["sweep"]["steps_run"]
    lines = [e for x in run.engine_log.splitlines() if (e := parse_hook_line(x))]
    bursts = [e.fields for e in lines if e.kind == "burst"]
    assert len(bursts) == sent > 0
    assert [b for b in bursts if not (b["whole"] and b["arrived"] == b["n"])] == []
    assert report["bursts"]["gated"] == report["bursts"]["whole"] == sent
    assert report["bursts"]["incomplete"] == []
    held = max(b["held_s"] for b in bursts)
    record(f"burst gate, {name}: {sent} bursts whole, the longest held {held} s", 0.0)


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


def test_a_burst_that_reached_the_scheduler_late_is_not_formed(runner_runs: RunnerRuns) -> None:
    """The control of the arrival: the same records with one request of a multi-request step
    hidden from the scheduler's first engine steps of that step (as if it arrived then) fail
    it on the arrival, counted in engine steps."""
    run = runner_runs["prefix-caching-off"]
    doc = run.plan
    plan = planned(tiny.tiny_sdd(**RUNS["prefix-caching-off"])).buckets
    lines = [line for line in run.steps() if line["reqs"]]
    comparison = Comparison(doc, plan, lines, False)
    step = next(s for s in comparison.sweep.steps if s.concurrency > 1)
    mine = sorted(r for r, (name, _) in comparison.owner.items() if name == step.name)
    first = next(i for i, line in enumerate(lines) if set(mine) & set(line["reqs"]))
    victim, late = mine[-1], 5
    news = next(line["new"][victim] for line in lines if victim in line["new"])
    hidden = [
        {
            **line,
            "waiting": [r for r in line["waiting"] if r != victim],
            "reqs": {r: v for r, v in line["reqs"].items() if r != victim},
            "new": {r: v for r, v in line["new"].items() if r != victim},
        }
        if first <= i < first + late
        else line
        for i, line in enumerate(lines)
    ]
    later = hidden[first + late]
    hidden[first + late] = {**later, "new": {**later["new"], victim: news}}  # it starts there
    assert victim in hidden[first + late]["reqs"]
    check = Comparison(doc, plan, hidden, False).check(step)
    assert not check.formed
    assert f"arrival took {late} engine steps > {comparison.arrival_steps}" in check.failures
