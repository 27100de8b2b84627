"""End-to-end: the drafter sweep and the compile hook against the stand-in engine (issue 16).

The stand-in (a test double) runs a drafter for eagle-type methods: its graphs compile on a fake
HPU the first time they run, and only the compile hook the runner installs (vLLM's general-plugin
entry point, through a dist-info on the engine's PYTHONPATH) reports them, as in the real engine.
The plans are the operator's: the sweep from ``plan_sweep`` of the issue's example (max_num_seqs
8, max_model_len 4096, k = 3), and a probe that replays the sweep's steps.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runner_harness import CONFIG_A, make_drafter_plan, make_plan, run_runner

from warmgate.buckets import EngineShapeConfig, plan_buckets, warmed_prompt_shapes
from warmgate.warmup.runner.outcomes import Outcome

pytestmark = pytest.mark.slow


def planned(plan: dict[str, Any]) -> set[tuple[Any, ...]]:
    return {tuple(g) for step in plan["drafter_sweep"]["steps"] for g in step["expected"]}


def test_the_sweep_compiles_every_planned_drafter_graph_and_the_probe_none(tmp_path: Path) -> None:
    plan = make_drafter_plan(tmp_path)
    result = run_runner(tmp_path, plan)
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    drafter = result.report()["drafter"]
    assert drafter["hook"] == "attached"
    assert drafter["verified"] is True
    assert drafter["expected"] == len(planned(plan)) == 77  # docs/coverage.md: 77 driven
    assert drafter["compiled"] == 77
    assert drafter["not_compiled"] == []
    assert drafter["probe_compiles"] == []
    # The engine's prompt warmup compiled the drafter graphs prove_drafter says it does (67).
    assert drafter["warmup_compiles"]["drafter"] == 67
    steps = {s["name"]: s for s in drafter["steps"]}
    assert list(steps) == [s["name"] for s in plan["drafter_sweep"]["steps"]]
    assert all(s["ok"] == s["sent"] and s["compiles"] >= 0 for s in steps.values())
    compiled = {tuple(g) for s in steps.values() for g in s["graphs"]}
    assert planned(plan) <= compiled
    assert result.summary["drafter"] == {
        "hook": "attached",
        "verified": True,
        "expected": 77,
        "driven": 77,
        "missing": 0,
        "probe": 0,
        "gaps": len(drafter["probe_known_gaps"]),
    }
    undriven = {tuple(u["shape"]) for u in plan["drafter_sweep"]["undriven"]}
    assert {tuple(g) for g in drafter["probe_known_gaps"]} <= undriven
    assert (
        "drafter: the sweep drove 77 of 77 planned graphs (77 compiled in it)"
        in (result.summary["reason"])
    )
    assert drafter["missing"] == []
    assert drafter["sweep"]["retried"] == []
    assert "warmgate-progress stage sweep" in result.stdout.splitlines()


def test_a_sweep_step_removed_fails_the_verdict_naming_its_graph(tmp_path: Path) -> None:
    plan = make_drafter_plan(tmp_path)
    removed = plan["drafter_sweep"]["steps"].pop(20)  # its probe replay stays
    result = run_runner(tmp_path, plan)
    assert result.code == int(Outcome.UNWARMED_SHAPES), result.stderr[-3000:]
    alone = {tuple(g) for g in removed["expected"]} - planned(plan)
    assert alone, "the removed step drove graphs no other step plans"
    named = {u for u in result.summary["unwarmed"] if u.startswith("Drafter graph")}
    report = result.report()["drafter"]
    others = {tuple(g) for g in report["other_sweep_graphs"]}
    # Each graph only that step planned compiled either in the probe (named) or, by chance, in
    # another sweep step that did not plan it; at least one is named.
    for graph in alone:
        text = f"Drafter graph {graph!r} compiled during the probe (not warmed)"
        assert text in named or graph in others
    assert named
    assert result.summary["reason"] in named
    assert result.summary["drafter"]["verified"] is False


def test_a_hook_that_cannot_attach_leaves_the_drafter_not_verified(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_drafter_plan(tmp_path), faults="hook_targets_moved")
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    reason = result.summary["reason"]
    assert "drafter: not verified: " in reason
    assert "HPUModelRunner.sample_tokens missing" in reason
    assert result.summary["drafter"]["hook"] == "not-attached"
    assert result.summary["drafter"]["verified"] is False
    assert result.report()["drafter"]["sweep"]["steps_run"] == 49  # the sweep still ran


def test_an_unreadable_compile_metric_leaves_the_drafter_not_verified(tmp_path: Path) -> None:
    """Issue 25: the hook read a failing metric as "no compiles", so every step looked warm and
    the drafter verified; now the first failed read stops the counting and nothing is claimed."""
    result = run_runner(tmp_path, make_drafter_plan(tmp_path), faults="metric_unreadable")
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    assert result.summary["drafter"]["verified"] is False
    assert result.summary["drafter"]["hook"] == "not-attached"
    assert (
        "drafter: not verified: graph_compilation metric failed: RuntimeError"
        in (result.summary["reason"])
    )


def test_a_required_hook_that_cannot_attach_is_its_own_outcome(tmp_path: Path) -> None:
    plan = make_drafter_plan(tmp_path, drafter_hook={"enabled": True, "required": True})
    result = run_runner(tmp_path, plan, faults="hook_targets_moved")
    assert result.code == int(Outcome.DRAFTER_UNVERIFIED) == 11
    assert result.summary["outcome"] == "drafter_unverified"
    assert result.summary["cache"] is None  # only a verified run publishes


def test_without_the_hook_the_sweep_runs_and_nothing_is_claimed(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_drafter_plan(tmp_path, hook=False))
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    drafter = result.report()["drafter"]
    assert drafter["hook"] == "off"
    assert drafter["verified"] is None
    assert len(drafter["steps"]) == 49
    assert "drafter: not checked (no compile hook)" in result.summary["reason"]
    assert "warmgate-hook" not in result.stderr


def test_ngram_needs_no_sweep_and_no_hook(tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, k=3))
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    assert result.report()["drafter"] is None
    assert "drafter" not in result.summary
    assert "warmgate-hook" not in result.stderr


def test_ngram_with_the_hook_attaches_and_compiles_nothing_in_the_probe(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, k=3, drafter_hook={"enabled": True})
    result = run_runner(tmp_path, plan)
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    drafter = result.report()["drafter"]
    assert (drafter["hook"], drafter["drafter_named"]) == ("attached", False)
    # One compile per shape the warmup runs, no drafter: every decode bucket, and the prompt
    # buckets' dummies, where (1, 2048, 31) runs the (1, 2048, 16) already compiled
    # (docs/coverage.md, "Buckets the warmup never compiles").
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=3)
    buckets = plan_buckets(config.model_copy(update={"speculative_method": "ngram"}))
    graphs = len(warmed_prompt_shapes(buckets)) + len(buckets.decode_buckets)
    assert graphs == plan["buckets"]["expected"]["prompt"]["count"] - 1 + len(
        buckets.decode_buckets
    )
    assert drafter["warmup_compiles"] == {"count": graphs, "drafter": 0}
    assert drafter["probe_compiles"] == []


def test_a_planned_graph_the_engine_never_runs_fails_closed_though_the_replay_misses_it(
    tmp_path: Path,
) -> None:
    """Issue 25: a planned graph the sweep never drives (here the stand-in's drafter never runs
    it, as an engine whose call sequence differs from the model would), and the probe's replay
    misses it for the same reason: the probe compiles nothing, and the run used to end verified.
    Now the steps that plan it are sent again, and the graph is an unwarmed shape, named."""
    plan = make_drafter_plan(tmp_path)
    steps = plan["drafter_sweep"]["steps"]
    graph = tuple(steps[0]["expected"][0])
    planners = [s["name"] for s in steps if list(graph) in s["expected"]]
    result = run_runner(tmp_path, plan, faults="drop_drafter_graph=" + "/".join(map(str, graph)))
    assert result.code == int(Outcome.UNWARMED_SHAPES), result.stderr[-3000:]
    drafter = result.report()["drafter"]
    assert drafter["probe_compiles"] == []  # the replay missed it for the same reason
    assert [tuple(g) for g in drafter["missing"]] == [graph]
    assert drafter["sweep"]["retried"] == planners
    assert result.summary["reason"] == (
        f"Drafter graph {graph!r} planned for the sweep never ran in it (its steps retried): it "
        "compiles at runtime"
    )
    assert result.summary["drafter"]["missing"] == 1
    assert result.summary["drafter"]["verified"] is False
    assert result.summary["cache"] is None  # nothing published


def test_missing_graphs_the_plan_accepts_are_counted_not_failed(tmp_path: Path) -> None:
    plan = make_drafter_plan(tmp_path, drafter_hook={"enabled": True, "accept_missing": True})
    graph = plan["drafter_sweep"]["steps"][0]["expected"][0]
    result = run_runner(tmp_path, plan, faults="drop_drafter_graph=" + "/".join(map(str, graph)))
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    assert result.summary["drafter"]["missing"] == 1
    assert "1 never ran (accepted by the plan)" in result.summary["reason"]


def test_steps_the_engine_never_scheduled_are_sent_again_and_verified(tmp_path: Path) -> None:
    """Every sweep request is answered without being scheduled (as if no burst reached the
    scheduler): no planned graph ran, the runner sends the steps again with fresh prompts, and
    the run is verified."""
    plan = make_drafter_plan(tmp_path)
    steps = plan["drafter_sweep"]["steps"]
    skipped = sum(s["concurrency"] for s in steps)
    result = run_runner(tmp_path, plan, faults=f"skip_requests={skipped}")
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    drafter = result.report()["drafter"]
    assert drafter["sweep"]["retried"] == [s["name"] for s in steps]
    assert drafter["missing"] == []
    assert drafter["driven"] == drafter["expected"] == len(planned(plan))
    retried = [s for s in drafter["steps"] if s["attempt"] == 1]
    assert [s["name"] for s in retried] == drafter["sweep"]["retried"]
    assert "warmgate-progress stage sweep-retry" in result.stdout.splitlines()


def test_no_probe_or_sweep_prompt_hits_the_prefix_cache_and_replays_run_their_steps(
    tmp_path: Path,
) -> None:
    """Issue 25: with prefix caching (the stand-in's default, as vLLM's), probe prompts seeded
    by the request index alone shared their prefix with the same index of every earlier probe
    step, so a replay's prefills started from cached blocks: not the sweep step's shapes, which
    assume distinct prompts. Now no request of the sweep or the probe hits the cache, every
    replay runs the prefill shapes of the step it replays, and every graph that step planned
    (the stand-in's trace of each engine step)."""
    plan = make_drafter_plan(tmp_path)
    trace = tmp_path / "trace.jsonl"
    plan["engine"]["env"]["STANDIN_TRACE"] = str(trace)
    plan["engine"]["args"] += ["--enable-prefix-caching"]
    result = run_runner(tmp_path, plan)
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    engine_steps = [json.loads(line) for line in trace.read_text().splitlines()]
    assert [h for step in engine_steps for h in step["hits"] if h] == []

    def window(began: float, ended: float) -> tuple[set[Any], set[Any]]:
        mine = [s for s in engine_steps if began <= s["t"] <= ended]
        prefills = {tuple(f[0]) for s in mine for f in s["forwards"] if f[0][0] == "prompt"}
        drafts = {tuple(g) for s in mine for f in s["forwards"] for g in f[1]}
        return prefills, drafts

    report = result.report()
    swept = {s["name"]: window(s["began"], s["ended"]) for s in report["drafter"]["steps"]}
    expected = {
        s["name"]: {tuple(g) for g in s["expected"]} for s in plan["drafter_sweep"]["steps"]
    }
    differ = {}
    for probe_step in report["probe"]["steps"]:
        name = probe_step["name"].removeprefix("replay-")
        if name in expected:
            prefills, drafts = window(probe_step["began"], probe_step["ended"])
            if prefills != swept[name][0] or not expected[name] <= drafts:
                differ[name] = (sorted(prefills ^ swept[name][0]), sorted(expected[name] - drafts))
    assert differ == {}
