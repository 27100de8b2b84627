"""The Warmed verdict comes from the runner's summary for this plan, never from the Job alone."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.kube_objects import runner_summary, terminated_status, warmup_pod

from warmgate.contract.summary import TerminationSummary
from warmgate.reconcile.sync.warmup_state import (
    WarmupSeen,
    evaluate_warmup,
    owned_pods,
    runner_messages,
)

KEY = "gaudi2-tp1-" + "a" * 40
JOB_UID = "uid-job-1"
OWNED = [{"kind": "Job", "name": "w-job", "uid": JOB_UID, "controller": True}]
# What the Job controller writes on its Pods besides the owner reference (it tracks them).
TRACKED = {
    "labels": {"batch.kubernetes.io/controller-uid": JOB_UID},
    "finalizers": ["batch.kubernetes.io/job-tracking"],
}
NOW = datetime(2026, 11, 29, 13, 0, tzinfo=UTC)
# The Job's pod template, as the operator wrote it; the Job controller's Pods run it.
TEMPLATE: dict[str, Any] = {
    "spec": {"containers": [{"name": "warmup", "image": "vllm-gaudi:test", "command": ["run"]}]}
}


def job(*conditions: str, annotations: dict[str, str] | None = None, **status: Any) -> Any:
    conds = [{"type": c, "status": "True"} for c in conditions]
    meta = {"name": "w-job", "uid": JOB_UID, "creationTimestamp": "2026-11-29T12:00:00Z"}
    if annotations:
        meta["annotations"] = annotations  # type: ignore[assignment]
    spec = {"template": TEMPLATE}
    return {"metadata": meta, "spec": spec, "status": {"conditions": conds, **status}}


def pod(
    created: str, message: str | None, container: str = "warmup", owners: Any = OWNED
) -> dict[str, Any]:
    terminated = {"exitCode": 0} | ({"message": message} if message else {})
    return {
        "metadata": {
            "name": "w-job-x",
            "creationTimestamp": created,
            "ownerReferences": owners,
            **TRACKED,
        },
        "spec": TEMPLATE["spec"],
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{"name": container, "state": {"terminated": terminated}}],
        },
    }


def pending_pod(created: str = "2026-11-29T12:00:00Z", **status: Any) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "w-job-p",
            "creationTimestamp": created,
            "ownerReferences": OWNED,
            **TRACKED,
        },
        "spec": TEMPLATE["spec"],
        "status": {"phase": "Pending", **status},
    }


def verified(key: str = KEY) -> str:
    return json.dumps({"v": 1, "outcome": "verified", "code": 0, "key": key, "kv_blocks": 7})


@pytest.mark.parametrize("text", ["", "not json", "[1, 2]", '{"code": 0}', '{"outcome": 3}'])
def test_anything_but_the_runners_json_is_no_summary(text: str) -> None:
    assert TerminationSummary.from_json(text) is None


def test_newest_pod_speaks_first_and_other_containers_are_ignored() -> None:
    pods = [
        pod("2026-11-29T12:05:00Z", "new"),
        pod("2026-11-29T12:00:00Z", "old"),
        pod("2026-11-29T12:09:00Z", "sidecar", container="copy-runner"),
    ]
    assert runner_messages(pods) == ["new", "old"]


def test_no_job_yet_is_pending_and_a_running_pod_is_warming() -> None:
    assert evaluate_warmup(None, [], KEY).verdict.reason == "WarmupPending"
    runner = pending_pod(phase="Running")
    running = evaluate_warmup(job(active=1), [runner], KEY)
    assert (running.verdict.status, running.verdict.reason) == ("False", "WarmupRunning")
    assert "is warming the plan (attempt 1)" in running.verdict.message
    assert not running.stalled


UNSCHEDULABLE = {
    "type": "PodScheduled",
    "status": "False",
    "reason": "Unschedulable",
    "message": "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.",
}


def _waiting(reason: str, message: str, init: bool = False) -> dict[str, Any]:
    key = "initContainerStatuses" if init else "containerStatuses"
    name = "copy-runner" if init else "warmup"
    return {key: [{"name": name, "state": {"waiting": {"reason": reason, "message": message}}}]}


@pytest.mark.parametrize(
    ("pods", "events", "reason", "said"),
    [
        ([pending_pod(conditions=[UNSCHEDULABLE])], [], "Unschedulable", "node affinity/selector"),
        (
            [pending_pod(**_waiting("ImagePullBackOff", 'Back-off pulling image "vllm:nope"'))],
            [],
            "ImagePullBackOff",
            "vllm:nope",
        ),
        (
            [pending_pod(**_waiting("CreateContainerConfigError", 'secret "hf" not found'))],
            [],
            "CreateContainerConfigError",
            'secret "hf" not found',
        ),
        (
            [pending_pod(**_waiting("ErrImagePull", "pull access denied", init=True))],
            [],
            "ErrImagePull",
            "container copy-runner",
        ),
        (
            [],
            [
                {
                    "reason": "FailedCreate",
                    "lastTimestamp": "2026-11-29T12:00:05Z",
                    "message": 'Error creating: pods "w-job-a" is forbidden: exceeded quota',
                }
            ],
            "FailedCreate",
            "exceeded quota",
        ),
        ([pending_pod()], [], "WarmupPending", "is starting"),
    ],
    ids=["unschedulable", "image", "secret", "init-image", "quota", "starting"],
)
def test_a_pending_pod_says_why_and_never_warming(
    pods: list[Any], events: list[Any], reason: str, said: str
) -> None:
    """Issue 11 item 4: the scheduler's, the kubelet's or the Job controller's reason."""
    seen = WarmupSeen(tuple(events), NOW, 3600)
    state = evaluate_warmup(job(active=1 if pods else 0), pods, KEY, seen)
    assert (state.verdict.status, state.verdict.reason) == ("False", reason)
    assert said in state.verdict.message
    assert "warming" not in state.verdict.message
    assert not state.stalled
    assert not state.stop


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            'pods "w" is forbidden: violates PodSecurity "restricted:latest": call evil.example',
            'violates PodSecurity "restricted:latest"',
        ),
        ("exceeded quota; visit https://evil.example", "exceeded quota"),
        ("Pay at https://evil.example to unlock your Gaudi cards", "reports FailedCreate"),
    ],
)
def test_an_events_text_never_reaches_the_condition(text: str, said: str) -> None:
    """Issue 34: `edit` may create Events, so a FailedCreate Event's message is told only by
    the cause the operator recognises in it, in its own words."""
    event = {"reason": "FailedCreate", "lastTimestamp": "2026-11-29T12:00:05Z", "message": text}
    state = evaluate_warmup(job(active=0), [], KEY, WarmupSeen((event,), NOW, 3600))
    assert state.verdict.reason == "FailedCreate"
    assert said in state.verdict.message
    assert "evil" not in state.verdict.message


def test_a_pod_pending_past_the_deadline_fails_the_warmup_with_its_reason() -> None:
    pods = [pending_pod(conditions=[UNSCHEDULABLE])]
    since = NOW - timedelta(seconds=3600)  # first seen waiting, on the operator's clock
    state = evaluate_warmup(job(active=1), pods, KEY, WarmupSeen((), NOW, 1800, since))
    assert (state.verdict.reason, state.stalled, state.stop) == ("Unschedulable", True, True)
    assert "Pending for 3600 s, more than spec.warmup.pendingTimeoutSeconds=1800" in (
        state.verdict.message
    )
    quiet = evaluate_warmup(job(active=1), [pending_pod()], KEY, WarmupSeen((), NOW, 1800, since))
    fresh = evaluate_warmup(job(active=1), pods, KEY, WarmupSeen((), NOW, 1800))
    assert (fresh.stop, fresh.summary.pending_since) == (False, NOW)  # the clock starts now
    assert (quiet.verdict.reason, quiet.stop) == ("PendingTimeout", True)


def test_a_stopped_job_keeps_its_verdict() -> None:
    """The reason word the operator wrote on the Job, and its own message from the status."""
    stopped = job(annotations={"warmgate.dev/warmup-failed": "Unschedulable: no Gaudi node"})
    told = ("Unschedulable", "0/1 nodes are available (the Job was stopped)")
    state = evaluate_warmup(stopped, [], KEY, WarmupSeen(stopped=told))
    assert (state.verdict.reason, state.verdict.message, state.stalled) == (*told, True)
    state = evaluate_warmup(stopped, [], KEY)  # the status lost: the operator's own words
    assert (state.verdict.reason, state.stalled) == ("Unschedulable", True)
    assert "no Gaudi node" not in state.verdict.message


@pytest.mark.parametrize(
    "annotation",
    [
        "Unschedulable: visit https://evil.example to fix your cluster",
        "VisitEvilExample: https://evil.example",
        "https://evil.example",
    ],
)
def test_the_text_of_a_hand_made_stop_annotation_never_reaches_a_condition(
    annotation: str,
) -> None:
    """Issue 34 case 7: `edit` may annotate a Job; the Warmed (and Stalled) message is the
    operator's own word with the Job's name, and a reason it never writes is WarmupFailed."""
    stopped = job(annotations={"warmgate.dev/warmup-failed": annotation})
    state = evaluate_warmup(stopped, [], KEY)
    assert "evil" not in state.verdict.message.lower()
    assert "evil" not in state.verdict.reason.lower()
    assert state.verdict.reason in ("Unschedulable", "WarmupFailed")


def test_only_pods_the_job_controls_speak() -> None:
    """Issue 11 item 9: a Pod with the job-name label but no owner reference to the Job (e.g.
    one made by hand) cannot fake the runner's verdict."""
    fake = pod("2026-11-29T12:00:00Z", verified(), owners=[])
    other = pod("2026-11-29T12:00:00Z", verified(), owners=[{**OWNED[0], "uid": "uid-other"}])
    state = evaluate_warmup(job("Complete"), [fake, other], KEY)
    assert state.verdict.status == "False"
    assert state.summary_of_run is None  # the fakes' "verified" was not read
    assert state.rerun  # the Job's own Pods are gone: it runs again


def test_complete_job_with_verified_summary_of_this_key_is_warmed() -> None:
    done = job("Complete", startTime="2026-11-29T12:00:00Z", completionTime="2026-11-29T12:01:40Z")
    state = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", verified())], KEY)
    assert (state.verdict.status, state.verdict.reason) == ("True", "WarmupSucceeded")
    assert state.summary.duration_seconds == 100
    assert "KV blocks 7" in state.verdict.message


def test_known_gaps_of_a_verified_run_are_named_in_the_warmed_message() -> None:
    gap = "Configuration: ('prompt', 1, 8192, 1) was not warmed-up!"
    summary = {**json.loads(verified()), "known_gaps_count": 1, "known_gaps": [gap]}
    done = job("Complete", startTime="2026-11-29T12:00:00Z", completionTime="2026-11-29T12:01:40Z")
    state = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", json.dumps(summary))], KEY)
    assert (state.verdict.status, state.verdict.reason) == ("True", "WarmupSucceeded")
    assert state.summary_of_run is not None
    assert state.summary_of_run.known_gaps == (gap,)
    assert (
        "logged no unwarmed shape but 1 known gap(s), shapes no warmup can compile "
        f"(CoverageProven UnwarmableShapes), e.g. {gap} (Job "
    ) in state.verdict.message


@pytest.mark.parametrize(
    "pods",
    [
        [pod("2026-11-29T12:00:00Z", None)],
        [pod("2026-11-29T12:00:00Z", verified(key="gaudi3-tp8-" + "b" * 40))],
    ],
    ids=["no-summary", "other-key"],
)
def test_complete_job_without_this_plans_verdict_is_refused(pods: list[dict[str, Any]]) -> None:
    state = evaluate_warmup(job("Complete"), pods, KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "WarmupFailed")
    assert state.stalled


def test_a_verdict_recorded_in_status_survives_the_job_for_the_same_key_only() -> None:
    from warmgate.api import WarmupSummary, set_condition
    from warmgate.reconcile.sync.warmup_state import remembered

    warmed = set_condition([], "Warmed", "True", "WarmupSucceeded", "verified")[0]
    summary = WarmupSummary(cache_key=KEY, kv_blocks=4321)
    state = remembered(warmed, summary, KEY, None)
    assert state is not None
    assert state.verdict.status == "True"
    assert state.summary_of_run is not None
    assert state.summary_of_run.kv_blocks == 4321  # serving keeps pinning it
    other = "gaudi3-tp8-" + "b" * 40
    assert remembered(warmed, summary, other, None) is None  # another plan or stack
    failed = set_condition([], "Warmed", "False", "WarmupFailed", "no")[0]
    assert remembered(failed, summary, KEY, None) is None


def test_the_record_vouches_for_one_cache_claim_only() -> None:
    """Issue 11 item 7: a claim that is gone or was replaced no longer holds the entry."""
    from warmgate.api import WarmupSummary, set_condition
    from warmgate.reconcile.sync.warmup_state import remembered

    warmed = set_condition([], "Warmed", "True", "WarmupSucceeded", "verified")[0]
    summary = WarmupSummary(cache_key=KEY, cache_claim_uid="uid-claim-1")
    assert remembered(warmed, summary, KEY, "uid-claim-1") is not None
    assert remembered(warmed, summary, KEY, "uid-claim-2") is None
    assert remembered(warmed, summary, KEY, None) is None


def test_a_completed_job_whose_pods_are_gone_is_warmed_again() -> None:
    """Its verdict went with its Pods: neither trusted nor condemned, but run again."""
    state = evaluate_warmup(job("Complete"), [], KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "WarmupPending")
    assert "Pods are gone" in state.verdict.message
    assert (state.rerun, state.stalled) == (True, False)


def test_a_pod_with_the_jobs_labels_and_owner_but_untracked_and_uncounted_is_no_evidence() -> None:
    """Anyone who can create Pods can copy the Job controller's labels and owner reference
    (issue 23 item 3); without its tracking finalizer, or the Job's counts agreeing with how the
    Pod ended, the Pod's termination message is not the runner's verdict."""
    job = {
        "metadata": {"name": "w", "uid": "job-uid", "annotations": {}},
        "spec": {"template": TEMPLATE},
        "status": {"conditions": [{"type": "Complete", "status": "True"}], "succeeded": 0},
    }
    forged = warmup_pod("ns", "w", "job-uid", tracked=False, template=TEMPLATE)
    forged["status"] = terminated_status(runner_summary("verified", "k"), True)
    assert owned_pods(job, [forged]) == []
    assert evaluate_warmup(job, [forged], "k").verdict.status == "False"
    job["status"]["succeeded"] = 1  # the Job controller counted a success: the Pod is its own
    assert owned_pods(job, [forged]) == [forged]
    tracked = warmup_pod("ns", "w", "job-uid", suffix="t", template=TEMPLATE)
    tracked["status"] = {"phase": "Running"}
    assert owned_pods({**job, "status": {}}, [tracked]) == [tracked]


def cpu_engine(key: str = KEY) -> str:
    """The runner's summary on a CPU build of vLLM the plan accepted (docs/runner.md)."""
    engine = {"kind": "cpu", "vllm": "0.32.0", "platform": "cpu"}
    doc = {"v": 5, "outcome": "cpu_engine", "code": 12, "key": key, "engine": engine}
    return json.dumps({**doc, "kv_blocks": None, "reason": "CPU engine (vLLM 0.32.0): ..."})


def test_a_cpu_engine_is_never_warmed_without_the_opt_in() -> None:
    """Fail-closed: a summary saying cpu_engine (a runner, or an image faking one) is refused
    unless spec.engine.acceptCPUEngine is set; it is never a Gaudi verification."""
    done = job("Complete")
    state = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", cpu_engine())], KEY)
    assert (state.verdict.status, state.verdict.reason) == ("False", "WarmupFailed")
    assert "CPU build (vLLM 0.32.0)" in state.verdict.message
    assert "spec.engine.acceptCPUEngine is not set" in state.verdict.message
    assert state.stalled


def test_an_accepted_cpu_engine_is_warmed_and_says_it_was_a_cpu_build() -> None:
    done = job("Complete")
    seen = WarmupSeen(accept_cpu=True)
    state = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", cpu_engine())], KEY, seen)
    assert (state.verdict.status, state.verdict.reason) == ("True", "CPUEngine")
    assert state.verdict.message.startswith("The engine was a CPU build (vLLM 0.32.0)")
    assert "no Gaudi graph was verified" in state.verdict.message
    assert (state.summary.engine_kind, state.summary.kv_blocks) == ("cpu", None)
    other = evaluate_warmup(done, [pod("2026-11-29T12:00:00Z", cpu_engine("x-tp1-b"))], KEY, seen)
    assert other.verdict.reason == "WarmupFailed"  # another plan's run vouches for nothing


def test_a_gaudi_run_records_its_engine_kind_and_the_opt_in_changes_nothing_for_it() -> None:
    summary = {**json.loads(verified()), "engine": {"kind": "gaudi", "vllm": "0.26.0"}}
    message = json.dumps(summary)
    for seen in (WarmupSeen(), WarmupSeen(accept_cpu=True)):
        state = evaluate_warmup(job("Complete"), [pod("2026-11-29T12:00:00Z", message)], KEY, seen)
        assert (state.verdict.reason, state.summary.engine_kind) == ("WarmupSucceeded", "gaudi")


def test_a_cpu_engine_record_keeps_its_reason() -> None:
    from warmgate.api import WarmupSummary, set_condition
    from warmgate.reconcile.sync.warmup_state import remembered

    warmed = set_condition([], "Warmed", "True", "CPUEngine", "The engine was a CPU build")[0]
    state = remembered(warmed, WarmupSummary(cache_key=KEY, engine_kind="cpu"), KEY, None)
    assert state is not None
    assert (state.verdict.reason, state.summary.engine_kind) == ("CPUEngine", "cpu")


def _phase(state: Any) -> str:
    """status.phase as the operator derives it from this Warmed verdict after planning."""
    from warmgate.api import derive_phase, set_condition

    v = state.verdict
    planned = set_condition([], "BucketsPlanned", "True", "Planned", "planned")
    return derive_phase(set_condition(planned, "Warmed", v.status, v.reason, v.message))


def test_a_verified_warmup_goes_from_warming_straight_to_starting() -> None:
    """Issue 26 item 3: between the runner's verified exit (its Pod Succeeded) and the Job
    controller marking the Job Complete, the phase stayed Warming and did not flicker back to
    Pending with an "attempt ended ... starts the next one" message that was not true."""
    running = pending_pod(phase="Running")
    finished = pod("2026-11-29T12:00:00Z", verified())
    started = {"startTime": "2026-11-29T12:00:00Z"}
    states = [
        evaluate_warmup(job(active=1, **started), [running], KEY),
        evaluate_warmup(job(active=1, **started), [finished], KEY),  # Job not marked yet
        evaluate_warmup(job(succeeded=1, **started), [finished], KEY),  # counted, no condition
        evaluate_warmup(job("Complete", succeeded=1, **started), [finished], KEY),
    ]
    assert [_phase(s) for s in states] == ["Warming", "Warming", "Warming", "Starting"]
    assert "the runner verified the plan" in states[1].verdict.message
    assert "next one" not in states[1].verdict.message
    assert not any(s.stalled for s in states)


def test_a_failed_attempt_waiting_for_its_retry_is_pending() -> None:
    """A phase may go back when something did: an attempt failed and the Job retries it."""
    failed = pod("2026-11-29T12:00:00Z", '{"outcome": "failed", "reason": "engine exited"}')
    failed["status"]["phase"] = "Failed"
    state = evaluate_warmup(job(active=0, failed=1), [failed], KEY)
    assert (_phase(state), state.verdict.reason) == ("Pending", "WarmupPending")
    assert "attempt 1 ended (failed: engine exited)" in state.verdict.message
