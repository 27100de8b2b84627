"""Contract: the runner's own validator accepts every plan the operator builds, and the plan's
seed file and digests describe exactly the lists the planner warmed."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import runner_harness
from support.resource_cases import EXAMPLES, SETTINGS, Case, make_case

from warmgate.api import DrafterWarmup
from warmgate.buckets import plan_buckets
from warmgate.contract.order import (
    KEY_RE,
    CacheUsers,
    PlanError,
    bucket_digest,
    load_plan,
    parse_plan,
)
from warmgate.contract.sweepplan import HookSpec
from warmgate.resources import desired_children
from warmgate.resources.probe_workload import MAX_TOKENS
from warmgate.resources.runner_plan import build_runner_plan
from warmgate.resources.vllm_engine import engine_of


def _doc(case: Case) -> dict[str, Any]:
    return case.children().runner_plan


def test_the_runner_validates_the_configmap_plan_file(case: Case, tmp_path: Path) -> None:
    children = case.children()
    configmap = children.warmup_configmap
    path = tmp_path / "plan.json"
    path.write_text(configmap["data"]["plan.json"])
    plan = load_plan(path)  # raises PlanError naming every problem
    assert plan.cache.key == children.cache_key
    assert KEY_RE.match(plan.cache.key)
    assert plan.buckets.seed_file_text == children.plan_configmap["data"]["buckets.txt"]
    assert plan.kv_blocks_expected == case.plan.config.num_gpu_blocks
    assert plan.engine.tensor_parallel_size == case.sdd.spec.engine.tensor_parallel_size


def test_the_known_unwarmable_shapes_reach_the_runner_as_the_engine_logs_them(case: Case) -> None:
    """Only a plan whose CoverageProven is UnwarmableShapes lists them (docs/runner.md)."""
    buckets = _doc(case)["buckets"]
    known = [tuple(g) for g in buckets.get("known_unwarmable", [])]
    assert known == list(case.to_run.known_unwarmable)
    assert parse_plan(_doc(case)).buckets.known_unwarmable == tuple(known)
    if case.name == "llama31-8b-eagle3-gaudi2":
        assert known == [("prompt", 1, 8192, 1)]


def test_the_validator_is_strict_so_the_contract_means_something(case: Case) -> None:
    doc = _doc(case)
    doc["engine"]["unexpected"] = 1
    with pytest.raises(PlanError, match=r"plan\.engine\.unexpected: unknown field"):
        parse_plan(doc)


def test_expected_digests_use_the_runners_algorithm(case: Case) -> None:
    expected = _doc(case)["buckets"]["expected"]
    lists = {
        "prompt": case.plan.prompt_buckets,
        "seed_decode": case.plan.seed_decode_buckets,
        "decode": case.plan.decode_buckets,
    }
    for name, rows in lists.items():
        assert expected[name] == {"count": len(rows), "digest": bucket_digest(rows)}


def test_the_seed_file_reproduces_the_planned_lists(case: Case) -> None:
    text = _doc(case)["buckets"]["seed_file_text"]
    again = plan_buckets(case.plan.config.model_copy(update={"bucket_file": text}))
    assert again.prompt_buckets == case.plan.prompt_buckets
    assert again.seed_decode_buckets == case.plan.seed_decode_buckets
    assert again.decode_buckets == case.plan.decode_buckets


def test_the_runner_deadlines_end_before_the_pod_deadline(case: Case) -> None:
    plan = parse_plan(_doc(case))
    job = case.children().warmup_job
    deadline = job["spec"]["template"]["spec"]["activeDeadlineSeconds"]
    t = plan.timeouts
    assert t.total_s < deadline
    assert t.facts_s + t.startup_s + t.probe_s + t.stop_grace_s <= t.total_s + 1e-6


def test_the_probe_hits_batches_the_scheduler_can_run(case: Case) -> None:
    plan = parse_plan(_doc(case))
    engine = case.sdd.spec.engine
    steps = plan.probe.steps
    assert all(s.concurrency <= engine.max_num_seqs for s in steps)
    assert all(s.prompt_tokens + s.max_tokens <= engine.max_model_len for s in steps)
    assert len({s.name for s in steps}) == len(steps)
    near = [s for s in steps if s.prompt_tokens + s.max_tokens == engine.max_model_len]
    assert near, "no step provokes partial drafts near max_model_len (§5.3)"
    repeat = [s for s in steps if s.token_pattern == "repeat"]
    assert bool(repeat) == (case.sdd.spec.speculative.method == "ngram")
    own = [s for s in steps if not s.name.startswith("replay-")]
    assert {s.max_tokens for s in own} == {MAX_TOKENS}
    replays = [s for s in steps if s.name.startswith("replay-")]
    sweep = plan.drafter_sweep.steps if plan.drafter_sweep else ()
    assert [(s.concurrency, s.prompt_tokens, s.max_tokens) for s in replays] == [
        (s.concurrency, s.prompt_tokens, s.max_tokens) for s in sweep
    ]


def test_no_probe_when_the_spec_turns_it_off(case: Case) -> None:
    warmup = case.sdd.spec.warmup.model_copy(update={"probe_workload": False})
    sdd = case.sdd.model_copy(update={"spec": case.sdd.spec.model_copy(update={"warmup": warmup})})
    runner_plan = desired_children(sdd, case.to_run, SETTINGS).runner_plan
    assert parse_plan(runner_plan).probe.steps == ()


def test_the_plan_accepts_missing_drafter_graphs_only_when_the_spec_allows_holes(
    case: Case,
) -> None:
    """complete: false accepts uncovered shapes, so a planned drafter graph the sweep never
    drives is a counted gap there (issue 25), and so does verification BestEffort (issue 33);
    every other plan fails closed on it, and requires the hook (verification Required)."""
    stated = case.sdd.spec.buckets.coverage.complete
    best_effort = case.sdd.spec.warmup.drafter.verification == "BestEffort"
    hook = _doc(case)["drafter_hook"]
    assert hook.get("accept_missing", False) is (not stated or (hook["enabled"] and best_effort))
    assert hook["required"] is (hook["enabled"] and not best_effort)
    coverage = case.sdd.spec.buckets.coverage.model_copy(update={"complete": False})
    buckets = case.sdd.spec.buckets.model_copy(update={"coverage": coverage})
    sdd = case.sdd.model_copy(
        update={"spec": case.sdd.spec.model_copy(update={"buckets": buckets})}
    )
    hook = desired_children(sdd, case.to_run, SETTINGS).runner_plan["drafter_hook"]
    assert hook["accept_missing"] is True
    assert parse_plan(desired_children(sdd, case.to_run, SETTINGS).runner_plan).drafter_hook == (
        HookSpec(enabled=hook["enabled"], required=hook["required"], accept_missing=True)
    )
    warmup = case.sdd.spec.warmup.model_copy(
        update={"drafter": DrafterWarmup(verification="BestEffort")}
    )
    sdd = case.sdd.model_copy(update={"spec": case.sdd.spec.model_copy(update={"warmup": warmup})})
    hook = desired_children(sdd, case.to_run, SETTINGS).runner_plan["drafter_hook"]
    # ngram has no drafter: BestEffort changes nothing in its plan
    assert (hook["required"], hook.get("accept_missing", False)) == (
        False,
        hook["enabled"] or not stated,
    )


# The stand-in plans from the seed file alone: it ignores VLLM_CONTIGUOUS_PA, so with contiguous
# PA its lists differ from the planner's and the runner rightly reports plan_mismatch (exit 4).
_STANDIN_CASES = [p.stem for p in EXAMPLES]


@pytest.mark.slow
@pytest.mark.parametrize("name", _STANDIN_CASES)
def test_the_runner_verifies_the_built_plan_against_the_standin_engine(
    name: str, tmp_path: Path
) -> None:
    """End to end on CPU: our plan, the real runner from a stdlib-only copy, the stand-in vLLM.

    Only the engine command, the local paths and the port are swapped for the test machine.
    For eagle-type methods the plan carries the drafter sweep and the compile hook, and the
    probe replays the sweep: the stand-in's drafter must compile nothing in the probe.
    """
    case = make_case(next(p for p in EXAMPLES if p.stem == name))
    doc = _doc(case)
    doc["engine"]["command"] = [sys.executable, str(runner_harness.STANDIN), "serve"]
    doc["engine"]["port"] = runner_harness.free_port()
    doc["cache"] |= {"volume_dir": str(tmp_path / "volume"), "local_dir": str(tmp_path / "l/r")}
    doc["report"] = {"termination_log": str(tmp_path / "termination-log")}
    doc["work_dir"] = str(tmp_path / "work")
    doc["require_device"] = False
    doc["timeouts"] = {"total_s": 240, "startup_s": 60, "probe_s": 120, "stop_grace_s": 10}
    doc["timeouts"]["sweep_s"] = 120
    result = runner_harness.run_runner(tmp_path, doc)
    assert result.code == 0, result.stderr[-3000:]
    assert result.summary["outcome"] == "verified"
    assert result.summary["key"] == doc["cache"]["key"]
    if "drafter_sweep" in doc:  # eagle-type: the stand-in's drafter agrees with prove_drafter
        drafter = result.summary["drafter"]
        assert (drafter["hook"], drafter["probe"]) == ("attached", 0)
        assert drafter["driven"] == drafter["expected"] > 0
    assert json.loads((tmp_path / "volume" / doc["cache"]["key"] / "manifest.json").read_text())


def test_only_an_opted_in_spec_lets_the_runner_accept_a_cpu_engine(case: Case) -> None:
    """Fail-closed by default: the plan says nothing (the runner refuses a CPU engine); the
    opt-in adds accept_cpu_engine, which the runner's validator reads."""
    assert "accept_cpu_engine" not in _doc(case)
    assert parse_plan(_doc(case)).accept_cpu_engine is False
    engine = case.sdd.spec.engine.model_copy(update={"accept_cpu_engine": True})
    sdd = case.sdd.model_copy(update={"spec": case.sdd.spec.model_copy(update={"engine": engine})})
    doc = desired_children(sdd, case.to_run, SETTINGS).runner_plan
    assert doc["accept_cpu_engine"] is True
    assert parse_plan(doc).accept_cpu_engine is True


def test_the_operator_builds_the_runners_own_plan_and_the_runner_reads_back_the_same(
    case: Case,
) -> None:
    """One type for both sides (issue 22 item 2): the operator builds the runner's
    `WarmupOrder`, and parsing its `to_json()` gives that same object back, field for field
    (only the digest of the text, which the reader computes, is new); the text is what the
    ConfigMap carries."""
    sdd, to_run = case.sdd, case.to_run
    children = case.children()
    order = build_runner_plan(
        sdd,
        to_run.buckets,
        key=children.cache_key,
        engine=engine_of(sdd).launch(to_run.buckets),
        sweep=to_run.drafter_sweep,
        known_unwarmable=to_run.known_unwarmable,
        users=CacheUsers.listed(["uid-a"], ["k-1"], 7),
        drafter_warmup=to_run.drafter_warmup,
    )
    back = parse_plan(order.to_json())
    assert back.plan_hash.startswith("sha256:")
    assert replace(back, plan_hash="") == order
    assert back.to_json() == order.to_json()
    plain = {**order.to_json(), "cache": {**order.to_json()["cache"]}}
    del plain["cache"]["users"]
    assert plain == children.runner_plan
