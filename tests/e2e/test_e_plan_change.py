"""Scenario e: a plan-changing edit (k 2 -> 3) while serving, then an edit that keeps the plan.

The new plan gets its own Job; the old plan keeps serving with Ready=True while it warms; the
new Pods exist only once the new plan is verified and stay gated until the operator opens
them; then the real Deployment controller completes the rollout. `kubectl wait
--for=condition=Ready`, started right after the edit, returns only then (issue 11 item 1), and
kstatus says InProgress until then. The old plan's Job, Pods and ConfigMaps are collected once
the new plan serves (item 8). Changing replicas afterwards re-warms nothing.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from e2e_support import E2ECluster, Sampler, condition, gate_open, is_true, pod_ready, sdd, wait_for
from support.kstatus import kstatus

NAME = "replan"
PLAN_LABEL = "warmgate.dev/plan-hash"


def _label(digest: str | None) -> str:
    return (digest or "").removeprefix("sha256:")[:16]


def _serving_pods(e2e: E2ECluster, ns: str) -> list[dict[str, Any]]:
    pods = e2e.items("pods", ns, NAME)
    return [p for p in pods if p["metadata"]["labels"].get("warmgate.dev/component") == "serving"]


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, k=2))
    e2e.wait_ready(namespace, NAME, check=True)
    old = e2e.get("sdd", "-n", namespace, NAME)["status"]

    def probe() -> dict[str, Any]:
        # The SDD, then the Pods, then the Jobs. What the SDD claims was true before the Pods
        # were read (a Pod once ready and claimed stays in the later read); a Job not complete
        # at the last read was not complete at the earlier ones, so the sample shows the new
        # plan still warming.
        obj = e2e.get("sdd", "-n", namespace, NAME)
        pods = _serving_pods(e2e, namespace)
        return {"pods": pods, "sdd": obj, "jobs": e2e.items("jobs", namespace, NAME)}

    with Sampler(probe) as sampler:
        patch = {"spec": {"speculative": {"numSpeculativeTokens": 3}}}
        e2e.kubectl("patch", "sdd", NAME, "-n", namespace, "--type=merge", "-p", json.dumps(patch))
        waited = e2e.wait_ready(namespace, NAME)
        after_wait = probe()

        def rolled_out() -> dict[str, Any] | None:
            obj = e2e.get("sdd", "-n", namespace, NAME)
            new = (obj["status"].get("plan") or {}).get("hash")
            pods = _serving_pods(e2e, namespace)
            done = (
                new != old["plan"]["hash"]
                and pods
                and all(
                    p["metadata"]["labels"][PLAN_LABEL] == _label(new) and pod_ready(p)
                    for p in pods
                )
            )
            return obj if done and is_true(obj, "Ready") else None

        final = wait_for("the rollout of the new plan", rolled_out, 300)
        jobs_gone = wait_for(
            "the old plan's Job to be collected",
            lambda: len(e2e.items("jobs", namespace, NAME)) == 1,
            60,
        )
    return {
        "old": old,
        "final": final,
        "samples": sampler.samples,
        "wait": waited,
        "after_wait": after_wait,
        "jobs_gone": jobs_gone,
    }


def _new_plan(run: dict[str, Any]) -> str:
    return str(run["final"]["status"]["plan"]["hash"])


def _warming_new(sample: dict[str, Any], run: dict[str, Any]) -> bool:
    """The SDD shows the new plan, and its Job (read last) has not completed."""
    status = sample["sdd"].get("status") or {}
    if (status.get("plan") or {}).get("hash") != _new_plan(run):
        return False
    new = _label(_new_plan(run))
    jobs = [j for j in sample["jobs"] if j["metadata"]["labels"].get(PLAN_LABEL) == new]
    return not any(is_true(j, "Complete") for j in jobs)


def test_the_new_plan_got_its_own_job(run: dict[str, Any]) -> None:
    keys = {
        j["metadata"]["annotations"]["warmgate.dev/cache-key"]
        for s in run["samples"]
        for j in s.data["jobs"]
    }
    assert len(keys) == 2


def test_the_old_plans_job_pods_and_configmaps_are_collected(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    """Issue 11 item 8: once the new plan serves, nothing of the old one is left. An old
    serving Pod mounts its plan's seed ConfigMap until it is gone, so the ConfigMap goes in the
    sync that Pod's deletion starts: looked for until then, at most a minute."""
    (job,) = e2e.items("jobs", namespace, NAME)
    assert is_true(job, "Complete")
    assert job["metadata"]["labels"][PLAN_LABEL] == _label(_new_plan(run))
    old = _label(run["old"]["plan"]["hash"])

    def left() -> list[str]:
        return [
            f"{kind} {o['metadata']['name']}"
            for kind in ("pods", "configmaps")
            for o in e2e.items(kind, namespace, NAME)
            if o["metadata"]["labels"].get(PLAN_LABEL) == old
        ]

    wait_for("the old plan's Pods and ConfigMaps to be collected", lambda: not left(), 60)


def test_the_old_plan_serves_with_ready_true_while_the_new_one_warms(run: dict[str, Any]) -> None:
    warming = [s.data for s in run["samples"] if _warming_new(s.data, run)]
    assert warming, "no sample caught the new plan warming"
    assert all(is_true(s["sdd"], "Ready") for s in warming)
    old = _label(run["old"]["serving"]["planHash"])
    assert all(p["metadata"]["labels"][PLAN_LABEL] == old for s in warming for p in s["pods"]), (
        "a Pod of the new plan existed before the new plan was verified"
    )


def test_new_pods_are_never_ready_with_their_gate_closed(run: dict[str, Any]) -> None:
    pods = [p for s in run["samples"] for p in s.data["pods"]]
    assert not [p["metadata"]["name"] for p in pods if pod_ready(p) and not gate_open(p)]


def test_the_rollout_completed_on_the_new_plan(run: dict[str, Any]) -> None:
    serving = run["final"]["status"]["serving"]
    assert serving["planHash"] == _new_plan(run)
    assert condition(run["final"], "Ready")["status"] == "True"


def test_ready_claims_the_new_plan_only_once_one_of_its_pods_is_ready(run: dict[str, Any]) -> None:
    new = _new_plan(run)
    for sample in (s.data for s in run["samples"]):
        status = sample["sdd"].get("status") or {}
        claims = (status.get("serving") or {}).get("planHash") == new
        if claims and is_true(sample["sdd"], "Ready"):
            assert any(
                p["metadata"]["labels"][PLAN_LABEL] == _label(new) and pod_ready(p)
                for p in sample["pods"]
            ), (
                f"Ready=True on plan {new[:19]}, none of its Pods ready: "
                f"{condition(sample['sdd'], 'Ready')}"
            )


def test_kubectl_wait_for_ready_waits_for_the_new_plan(run: dict[str, Any]) -> None:
    """Issue 11 item 1: Ready stays True for the old plan, but its observedGeneration stays
    behind, so `kubectl wait` (which compares it with metadata.generation) returns only when
    every replica runs the new plan (an old Pod may still be terminating, as after any rollout)."""
    assert run["wait"].returncode == 0, run["wait"].stderr
    obj, pods = run["after_wait"]["sdd"], run["after_wait"]["pods"]
    new = _new_plan(run)
    assert obj["status"]["serving"]["planHash"] == new
    assert condition(obj, "Ready")["observedGeneration"] == obj["metadata"]["generation"]
    # An old plan's Pod may still be terminating: like `kubectl rollout status`, the Deployment
    # no longer counts it (status.replicas excludes terminating Pods) and no endpoint routes to it.
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    assert live
    seen = [(p["metadata"], pod_ready(p)) for p in pods]
    on_new = [p["metadata"]["labels"][PLAN_LABEL] == _label(new) and pod_ready(p) for p in live]
    assert all(on_new), seen


def test_kstatus_says_in_progress_until_the_new_plan_serves(run: dict[str, Any]) -> None:
    """What Flux, Argo CD and kpt see: InProgress while the new plan warms and rolls out,
    Current once it serves; never Failed."""
    warming = [s.data for s in run["samples"] if _warming_new(s.data, run)]
    assert warming
    assert {kstatus(s["sdd"]) for s in warming} == {"InProgress"}
    assert all(is_true(s["sdd"], "Ready") for s in warming)  # and traffic is served
    assert "Failed" not in {kstatus(s.data["sdd"]) for s in run["samples"]}
    assert kstatus(run["final"]) == "Current"


def test_an_edit_outside_the_plan_rewarms_nothing(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    patch = {"spec": {"serving": {"replicas": 2}}}
    e2e.kubectl("patch", "sdd", NAME, "-n", namespace, "--type=merge", "-p", json.dumps(patch))

    def scaled() -> bool:
        return len(_serving_pods(e2e, namespace)) == 2

    wait_for("the second replica", scaled, 60)
    obj = e2e.get("sdd", "-n", namespace, NAME)
    assert len(e2e.items("jobs", namespace, NAME)) == 1
    assert obj["status"]["warmup"]["cacheKey"] == run["final"]["status"]["warmup"]["cacheKey"]
    assert is_true(obj, "Warmed")
