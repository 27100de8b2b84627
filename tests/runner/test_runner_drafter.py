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


# Each way the compile hook cannot give evidence (issue 33): the stand-in's fault, the cause
# the summary names, and the hook's own words in the reason.
BLIND = {
    # vLLM loads no general plugin: nothing in the engine reports the drafter's graphs.
    "plugin absent": (
        "no_general_plugins",
        "plugin-not-loaded",
        "no engine process loaded the compile hook",
    ),
    # vllm_gaudi's proposer renamed (class and method): the drafter's forwards go unnamed.
    "proposer renamed": (
        "proposer_renamed",
        "proposer-not-found",
        "HpuEagleProposer.propose missing",
    ),
    # Habana's graph_compilation stats() raises: an unreadable count is never "no compiles".
    "metric unreadable": (
        "metric_unreadable",
        "metric-unreadable",
        "graph_compilation metric failed: RuntimeError",
    ),
    # The model runner's method moved: the hook attaches to nothing.
    "runner moved": (
        "hook_targets_moved",
        "hook-not-attached",
        "HPUModelRunner.sample_tokens missing",
    ),
}


@pytest.mark.parametrize("case", list(BLIND))
def test_missing_drafter_evidence_leaves_the_run_not_verified(tmp_path: Path, case: str) -> None:
    """Fail closed (issue 33): with spec.warmup.drafter.verification Required (the operator's
    default plan requires the hook), a run whose hook could not see the drafter ends
    drafter_unverified (exit 11, permanent), names the cause, counts every planned graph as
    without evidence, and publishes nothing. The target's verification still ran (the sweep
    too): only the drafter's evidence is missing."""
    fault, cause, words = BLIND[case]
    result = run_runner(tmp_path, make_drafter_plan(tmp_path), faults=fault)
    assert result.code == int(Outcome.DRAFTER_UNVERIFIED) == 11, result.stderr[-3000:]
    summary = result.summary
    assert summary["outcome"] == "drafter_unverified"
    assert summary["reason"].startswith("drafter: not verified: ")
    assert words in summary["reason"]
    assert "; target: every planned shape was warmed" in summary["reason"]
    drafter = summary["drafter"]
    assert (drafter["verified"], drafter["cause"]) == (False, cause)
    assert drafter["unverified"] == drafter["expected"] == 77
    # the hook's own words, unless the cause says it all
    assert words in drafter["detail"] if cause != "plugin-not-loaded" else not drafter["detail"]
    assert summary["cache"] is None  # only a verified run publishes
    assert result.report()["drafter"]["sweep"]["steps_run"] == 49  # the sweep still ran


def test_best_effort_passes_without_drafter_evidence_and_counts_it(tmp_path: Path) -> None:
    """spec.warmup.drafter.verification BestEffort: the same blind hook leaves the run
    verified (the target's buckets are), with the drafter's missing evidence counted."""
    plan = make_drafter_plan(tmp_path, verification="BestEffort")
    assert plan["drafter_hook"] == {"enabled": True, "required": False, "accept_missing": True}
    result = run_runner(tmp_path, plan, faults="metric_unreadable")
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    assert (
        "drafter: not verified: graph_compilation metric failed: RuntimeError"
        in (result.summary["reason"])
    )
    drafter = result.summary["drafter"]
    assert (drafter["hook"], drafter["verified"], drafter["cause"]) == (
        "not-attached",
        False,
        "metric-unreadable",
    )
    assert drafter["unverified"] == drafter["expected"] == 77
    assert result.summary["cache"] is not None


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


# ---- issue 33: the direct warmup's whole set, run by the real engine plugin in the stand-in ----
# With the plan's drafter_warmup, the runner points the stand-in's engine at the document and the
# real plugin's warm loop (hook/drafter_warm.py gaudi_warmer) drives the stand-in's proposer
# double for every shape, before /health. A shape no sweep step plans and the engine's own
# warmup never runs: (decode, 3, 1, 4), partial drafts only.
UNSWEPT = ("decode", 3, 1, 4)
UNSWEPT_FAULT = "/".join(map(str, UNSWEPT))


def test_the_direct_warmup_warms_the_whole_set_and_the_run_is_verified(tmp_path: Path) -> None:
    plan = make_drafter_plan(tmp_path, direct=True)
    shapes = {tuple(s) for s in plan["drafter_warmup"]["shapes"]}
    assert UNSWEPT in shapes
    assert UNSWEPT not in planned(plan)
    result = run_runner(tmp_path, plan)
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    direct = result.summary["drafter_warmup"]
    assert (direct["state"], direct["engine"]) == ("done", "gaudi")
    assert direct["planned"] == direct["warmed"] == len(shapes) == 181
    assert direct["warmed_digest"] == direct["planned_digest"]
    drafter = result.summary["drafter"]
    assert (drafter["verified"], drafter["planned"]) == (True, 181)
    assert "cause" not in drafter
    assert "direct warmup set: 181 of 181 shapes with evidence" in result.summary["reason"]
    report = result.report()
    assert report["drafter"]["incomplete"] == []
    assert report["drafter"]["probe_compiles"] == []


@pytest.mark.parametrize(
    ("fault", "cause", "unverified", "named"),
    [
        # the plugin never reached one shape (no line): incomplete, 1 shape, named
        (
            f"drafter_warmup_skip={UNSWEPT_FAULT}",
            "direct-warmup-incomplete",
            1,
            f"1 neither warmed directly nor compiled in the sweep (first {UNSWEPT!r})",
        ),
        # the drafter raised on one shape: failed, 1 shape
        (f"drafter_warmup_raise={UNSWEPT_FAULT}", "direct-warmup-failed", 1, "1 failed in the"),
        # the drafter never ran the planned graph: the plugin's own check fails the shape
        (f"drop_drafter_graph={UNSWEPT_FAULT}", "direct-warmup-failed", 1, "1 failed in the"),
        # no plugin at all, the proposer renamed, the metric unreadable: every planned shape
        ("no_general_plugins", "plugin-not-loaded", 181, "no engine process loaded"),
        ("proposer_renamed", "proposer-not-found", 181, "HpuEagleProposer.propose missing"),
        ("metric_unreadable", "metric-unreadable", 181, "graph_compilation metric failed"),
    ],
)
def test_a_direct_warmup_shape_without_evidence_fails_closed(
    tmp_path: Path, fault: str, cause: str, unverified: int, named: str
) -> None:
    """Fail closed (issue 33): under Required, every shape of the plan's drafter_warmup needs
    evidence; without it the run ends drafter_unverified (exit 11: Warmed=False
    DrafterUnverified), with the cause and how many shapes, and publishes nothing."""
    result = run_runner(tmp_path, make_drafter_plan(tmp_path, direct=True), faults=fault)
    assert result.code == int(Outcome.DRAFTER_UNVERIFIED), result.stderr[-3000:]
    drafter = result.summary["drafter"]
    assert (drafter["verified"], drafter["cause"]) == (False, cause)
    assert (drafter["unverified"], drafter["planned"]) == (unverified, 181)
    assert named in result.summary["reason"] or named in drafter["detail"]
    assert result.summary["cache"] is None


def test_best_effort_passes_with_a_direct_warmup_shape_missing_and_counts_it(
    tmp_path: Path,
) -> None:
    plan = make_drafter_plan(tmp_path, direct=True, verification="BestEffort")
    result = run_runner(tmp_path, plan, faults=f"drafter_warmup_skip={UNSWEPT_FAULT}")
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    drafter = result.summary["drafter"]
    assert (drafter["verified"], drafter["cause"], drafter["unverified"]) == (
        False,
        "direct-warmup-incomplete",
        1,
    )
    assert result.summary["drafter_warmup"]["missing"] == 1
    assert "direct warmup set: 180 of 181 shapes with evidence" in result.summary["reason"]
    assert result.summary["cache"] is not None
