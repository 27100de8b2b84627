"""The Warmed verdict comes from the runner's summary for this plan, never from the Job alone."""

from __future__ import annotations

import json
from typing import Any

import pytest

from warmgate.reconcile.warmup_state import RunnerSummary, evaluate_warmup, runner_messages

KEY = "gaudi2-tp1-" + "a" * 40


def job(*conditions: str, **status: Any) -> dict[str, Any]:
    conds = [{"type": c, "status": "True"} for c in conditions]
    return {"metadata": {"name": "w-job"}, "status": {"conditions": conds, **status}}


def pod(created: str, message: str | None, container: str = "warmup") -> dict[str, Any]:
    terminated = {"exitCode": 0} | ({"message": message} if message else {})
    return {
        "metadata": {"creationTimestamp": created},
        "status": {"containerStatuses": [{"name": container, "state": {"terminated": terminated}}]},
    }


def verified(key: str = KEY) -> str:
    return json.dumps({"v": 1, "outcome": "verified", "code": 0, "key": key, "kv_blocks": 7})


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"code": 0}', '{"outcome": 3}'])
def test_anything_but_the_runners_json_is_no_summary(text: str) -> None:
    assert RunnerSummary.parse(text) is None


def test_newest_pod_speaks_first_and_other_containers_are_ignored() -> None:
    pods = [
        pod("2026-11-29T12:05:00Z", "new"),
        pod("2026-11-29T12:00:00Z", "old"),
        pod("2026-11-29T12:09:00Z", "sidecar", container="copy-runner"),
    ]
    assert runner_messages(pods) == ["new", "old"]


def test_no_job_yet_is_pending_and_an_active_job_is_running() -> None:
    assert evaluate_warmup(None, [], KEY).verdict.reason == "WarmupPending"
    running = evaluate_warmup(job(active=1), [], KEY)
    assert (running.verdict.status, running.verdict.reason) == ("False", "WarmupRunning")
    assert not running.stalled


def test_complete_job_with_verified_summary_of_this_key_is_warmed() -> None:
    done = job("Complete", startTime="2026-11-29T12:00:00Z", completionTime="2026-11-29T12:01:40Z")
    state = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", verified())], KEY)
    assert (state.verdict.status, state.verdict.reason) == ("True", "WarmupSucceeded")
    assert state.summary.duration_seconds == 100
    assert "KV blocks 7" in state.verdict.message


@pytest.mark.parametrize(
    "pods",
    [[], [pod("2026-11-29T12:00:00Z", verified(key="gaudi3-tp8-" + "b" * 40))]],
    ids=["no-summary", "other-key"],
)
def test_complete_job_without_this_plans_verdict_is_refused(pods: list[dict[str, Any]]) -> None:
    state = evaluate_warmup(job("Complete"), pods, KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "WarmupFailed")
    assert state.stalled


def test_a_verdict_recorded_in_status_survives_the_job_for_the_same_key_only() -> None:
    from warmgate.api import WarmupSummary, set_condition
    from warmgate.reconcile.warmup_state import remembered

    warmed = set_condition([], "Warmed", "True", "WarmupSucceeded", "verified")[0]
    summary = WarmupSummary(cache_key=KEY, kv_blocks=4321)
    state = remembered(warmed, summary, KEY)
    assert state is not None
    assert state.verdict.status == "True"
    assert state.summary_of_run is not None
    assert state.summary_of_run.kv_blocks == 4321  # serving keeps pinning it
    assert remembered(warmed, summary, "gaudi3-tp8-" + "b" * 40) is None  # another plan or stack
    failed = set_condition([], "Warmed", "False", "WarmupFailed", "no")[0]
    assert remembered(failed, summary, KEY) is None
