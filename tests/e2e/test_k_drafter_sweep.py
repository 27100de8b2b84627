"""Scenario k: an eagle3 SDD whose warmup Job drives the drafter sweep and verifies it (issue 16).

The operator plans the drafter's graphs and their sweep; the real Job runs the runner in the
stand-in engine image (a test double), which loads the runner's compile hook through vLLM's
general-plugin entry point exactly as the real engine would; the stand-in's drafter compiles
its graphs on a fake HPU that only the hook reports. The runner drives the sweep, replays it in
the probe, and the operator records what the hook saw.

Fail closed (issue 33): a second eagle3 SDD whose engine loads no general plugin (the stand-in's
fault ``no_general_plugins``: the hook is missing) is Warmed=False with reason DrafterUnverified,
naming the cause and the planned shapes without evidence, and nothing serves it. The verified
one's engine plugin warmed every shape of the plan's direct-warmup set (the real plugin's warm
loop, driving the stand-in's proposer double); a third, whose plugin never reaches the decode
shapes of that set (fault ``drafter_warmup_skip=decode``), is Warmed=False too: those the sweep
did not compile have no evidence (cause direct-warmup-incomplete, with the count).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import E2ECluster, condition, is_true, sdd, wait_for, warmup_end

NAME = "drafter"


BLIND = "drafter-blind"
PARTIAL = "drafter-partial"


@pytest.fixture(scope="module")
def applied(e2e: E2ECluster, namespace: str) -> None:
    """Both SDDs at once: their Jobs run side by side."""
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, k=2, method="eagle3"))
    blind = sdd(BLIND, namespace, e2e.images.engine.ref, k=2, method="eagle3")
    blind["spec"]["engine"]["env"] = [{"name": "STANDIN_FAULTS", "value": "no_general_plugins"}]
    e2e.apply(blind)
    partial = sdd(PARTIAL, namespace, e2e.images.engine.ref, k=2, method="eagle3")
    skip = {"name": "STANDIN_FAULTS", "value": "drafter_warmup_skip=decode"}
    partial["spec"]["engine"]["env"] = [skip]
    e2e.apply(partial)


def settled(e2e: E2ECluster, namespace: str, name: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        obj = e2e.get("sdd", "-n", namespace, name)
        return obj if is_true(obj, "Warmed") or is_true(obj, "Stalled") else None

    return dict(wait_for(f"{name}: Warmed=True or Stalled", done, 420))


def drafter_unverified(
    e2e: E2ECluster, namespace: str, name: str
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The object once settled, its Warmed condition (asserted False for DrafterUnverified)
    and its one Job."""
    obj = settled(e2e, namespace, name)
    warmed_condition = condition(obj, "Warmed")
    assert (warmed_condition["status"], warmed_condition["reason"]) == (
        "False",
        "DrafterUnverified",
    ), warmed_condition
    (job,) = e2e.items("jobs", namespace, name)
    return obj, warmed_condition, job


@pytest.fixture(scope="module")
def warmed(e2e: E2ECluster, namespace: str, applied: None) -> dict[str, Any]:
    return settled(e2e, namespace, NAME)


def test_the_plan_status_shows_target_and_drafter(warmed: dict[str, Any]) -> None:
    plan = warmed["status"]["plan"]
    assert plan["drafterShapes"] >= plan["drafterSwept"] > 0
    proven = condition(warmed, "CoverageProven")
    assert proven["message"].startswith("target: ")
    # maxModelLen = maxNumBatchedTokens = 2048, eagle3 k=2: a 2046-token chunk after one
    # computed token pads to (1, 2048, 1), whose warmup dummy keeps no context; the completed
    # plan is warmed anyway (docs/coverage.md, "Buckets the warmup never compiles").
    assert (proven["status"], proven["reason"]) == ("False", "UnwarmableShapes")
    assert plan["uncoveredShapes"] == ["('prompt', 1, 2048, 1)"]
    assert "compile at runtime whatever the plan" in proven["message"]
    assert "the warmup reports these shapes as known gaps; drafter: " in proven["message"]
    assert (
        f"drafter: {plan['drafterShapes']} shapes the engine compiles at runtime, "
        f"{plan['drafterSwept']} driven by the warmup sweep"
    ) in proven["message"]


def test_the_job_drove_the_sweep_and_the_hook_verified_it(
    e2e: E2ECluster, namespace: str, warmed: dict[str, Any]
) -> None:
    warmed_condition = condition(warmed, "Warmed")
    assert warmed_condition["status"] == "True", warmed_condition
    (job,) = e2e.items("jobs", namespace, NAME)
    summary = json.loads(warmup_end(e2e, namespace, job)["message"])
    drafter = summary["drafter"]
    assert (summary["outcome"], drafter["hook"], drafter["verified"]) == (
        "verified",
        "attached",
        True,
    )
    assert drafter["driven"] == drafter["expected"] == warmed["status"]["plan"]["drafterSwept"]
    assert drafter["probe"] == 0
    # Issue 33: the engine plugin warmed the plan's whole direct-warmup set before /health.
    direct = summary["drafter_warmup"]
    assert (direct["state"], direct["engine"], direct["failed"], direct["missing"]) == (
        "done",
        "gaudi",
        0,
        0,
    )
    assert direct["warmed"] == direct["planned"] > drafter["expected"]
    assert direct["warmed_digest"] == direct["planned_digest"]
    assert drafter["planned"] >= direct["planned"]
    status = warmed["status"]["warmup"]
    assert (status["drafterDriven"], status["drafterVerified"]) == (drafter["driven"], True)
    assert (
        f"drafter: {drafter['driven']} of {drafter['expected']} planned graphs driven in the "
        "sweep, none compiled in the probe"
    ) in warmed_condition["message"]
    # The runner plan's ConfigMap is named like the Job that mounts it (resources.md).
    plan_map = e2e.get("configmap", "-n", namespace, status["jobName"])
    runner_plan = json.loads(plan_map["data"]["plan.json"])
    assert runner_plan["drafter_hook"] == {"enabled": True, "required": True}
    assert runner_plan["buckets"]["known_unwarmable"] == [["prompt", 1, 2048, 1]]
    assert len(runner_plan["drafter_sweep"]["steps"]) > 0


def test_a_missing_hook_leaves_the_warmup_not_verified(
    e2e: E2ECluster, namespace: str, applied: None
) -> None:
    """Issue 33: the engine loaded no compile hook, so no planned drafter shape has evidence:
    the runner ends drafter_unverified (exit 11, the Job fails at once) and the operator writes
    Warmed=False, DrafterUnverified, with the cause and the count; no Deployment serves it."""
    obj, warmed_condition, job = drafter_unverified(e2e, namespace, BLIND)
    assert is_true(job, "Failed"), job["status"]
    ended = warmup_end(e2e, namespace, job)  # its one Pod: exit 11 is permanent, no retry
    summary = json.loads(ended["message"])
    assert (summary["outcome"], ended["exitCode"]) == ("drafter_unverified", 11)
    assert summary["drafter"]["cause"] == "plugin-not-loaded"
    # every planned drafter shape: the sweep's and the direct warmup's
    planned = summary["drafter"]["planned"]
    assert planned > obj["status"]["plan"]["drafterSwept"] > 0
    assert (
        "drafter not verified: the engine loaded no compile hook (vLLM did not load the plugin)"
        f": {planned} of {planned} planned drafter shapes without evidence"
    ) in warmed_condition["message"]
    assert e2e.items("deployments", namespace, BLIND) == []


def test_direct_warmup_shapes_without_evidence_leave_the_warmup_not_verified(
    e2e: E2ECluster, namespace: str, applied: None
) -> None:
    """Issue 33: the plugin never reached the decode shapes of the direct-warmup set; the
    ones the sweep did not compile have no evidence, so Warmed=False, DrafterUnverified, naming
    the cause and how many shapes; no Deployment serves it."""
    _, warmed_condition, job = drafter_unverified(e2e, namespace, PARTIAL)
    summary = json.loads(warmup_end(e2e, namespace, job)["message"])
    drafter = summary["drafter"]
    assert (summary["outcome"], drafter["cause"]) == (
        "drafter_unverified",
        "direct-warmup-incomplete",
    )
    assert 0 < drafter["unverified"] <= summary["drafter_warmup"]["missing"]
    assert (
        "drafter not verified: planned shapes were neither warmed by the engine plugin's direct "
        f"drafter warmup nor compiled in the sweep: {drafter['unverified']} of "
        f"{drafter['planned']} planned drafter shapes without evidence"
    ) in warmed_condition["message"]
    assert e2e.items("deployments", namespace, PARTIAL) == []
