"""Fail closed on the drafter (issue 33 item 3), on the real API server: the operator makes the
plan require the compile hook, a run without drafter evidence is Warmed=False with reason
DrafterUnverified (no serving Deployment), and spec.warmup.drafter.verification BestEffort is
Warmed=True with the count in the status.

No kubelet or Job controller runs here: the test plays them (the Pod's termination summary and
the Job's condition, through the status subresources), as test_operator_warmup.py does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.api_controllers import finish, get, runner_summary, seeds_example, started
from support.kube_objects import condition_map

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def blind(expected: int, cause: str, detail: str) -> dict[str, Any]:
    """The drafter counts a runner writes when its hook could not see the drafter."""
    return {
        "hook": "not-attached",
        "verified": False,
        "expected": expected,
        "driven": 0,
        "missing": 0,
        "probe": 0,
        "gaps": 0,
        "unverified": expected,
        "cause": cause,
        "detail": detail,
    }


def runner_plan(cp: ControlPlane, ns: str, job: str) -> dict[str, Any]:
    """The plan.json the operator wrote for the Job (its ConfigMap has the Job's name)."""
    return dict(json.loads(get(cp, "-n", ns, "configmap", job)["data"]["plan.json"]))


def warmed(obj: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == "Warmed")


def test_a_run_without_drafter_evidence_is_not_warmed(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    obj = started(control_plane, ns, "required")
    warmup, planned = obj["status"]["warmup"], obj["status"]["plan"]["drafterSwept"]
    assert planned > 0
    hook = runner_plan(control_plane, ns, warmup["jobName"])["drafter_hook"]
    assert hook == {"enabled": True, "required": True}  # Required is the default
    summary = runner_summary(
        "drafter_unverified",
        warmup["cacheKey"],
        reason="drafter: not verified: no engine process loaded the compile hook",
        drafter=blind(planned, "plugin-not-loaded", ""),
    )
    finish(control_plane, ns, warmup["jobName"], summary, ok=False)
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/required", "--for=condition=Stalled", "--timeout=60s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "required")
    assert condition_map(obj)["Warmed"] == ("False", "DrafterUnverified")
    assert warmed(obj)["message"] == (
        f"Job {warmup['jobName']}: drafter not verified: the engine loaded no compile hook (vLLM "
        f"did not load the plugin): {planned} of {planned} planned drafter shapes without "
        "evidence; spec.warmup.drafter.verification is Required (BestEffort would serve without "
        "it)"
    )
    assert obj["status"]["phase"] == "Failed"
    assert condition_map(obj)["Ready"] == ("False", "WarmupPending")
    deployments = control_plane.kubectl("get", "deployments", "-n", ns, "-o", "name").stdout
    assert "required-serving" not in deployments  # nothing serves an unverified drafter


def test_best_effort_is_warmed_and_counts_what_was_not_verified(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str
) -> None:
    ns = module_namespace
    doc = seeds_example(ns, "best-effort")
    doc["spec"]["warmup"] = {"drafter": {"verification": "BestEffort"}}
    obj = started(control_plane, ns, "best-effort", doc)
    warmup, planned = obj["status"]["warmup"], obj["status"]["plan"]["drafterSwept"]
    hook = runner_plan(control_plane, ns, warmup["jobName"])["drafter_hook"]
    assert hook == {"enabled": True, "required": False, "accept_missing": True}
    detail = "graph_compilation metric failed: RuntimeError: stats changed"
    summary = runner_summary(
        "verified",
        warmup["cacheKey"],
        kv_blocks=4321,
        drafter=blind(planned, "metric-unreadable", detail),
    )
    finish(control_plane, ns, warmup["jobName"], summary, ok=True)
    control_plane.kubectl(
        "wait", "-n", ns, "sdd/best-effort", "--for=condition=Warmed", "--timeout=60s"
    )
    obj = get(control_plane, "-n", ns, "sdd", "best-effort")
    assert condition_map(obj)["Warmed"] == ("True", "WarmupSucceeded")
    assert (
        "; drafter not verified, accepted by spec.warmup.drafter.verification=BestEffort: "
        f"Habana's graph_compilation metric could not be read ({detail}): {planned} of "
        f"{planned} planned drafter shapes without evidence"
    ) in warmed(obj)["message"]
    status = obj["status"]["warmup"]
    assert (status["drafterUnverified"], status["drafterVerified"]) == (planned, False)
