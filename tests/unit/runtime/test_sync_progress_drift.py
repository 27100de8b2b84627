"""Warmup progress and serving drift, as one sync reads them from the runners' endpoints: the
pure rules (progress, rate limit, drift record, seed proposal) and the whole sync against the
fake cluster (`sync_world.World`, the runners' endpoints played by the test)."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from support.engines import CONFIG_A
from support.examples import example_sdd
from support.kube_objects import (
    job_status,
    runner_summary,
    terminated_status,
    warmup_pod,
)
from sync_world import NAME, NS, World

from warmgate.api.status import SpecDecodeDeploymentStatus, WarmupProgress
from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.contract.board import RunnerBoard, ServeBoard, WarmupBoard, read_board
from warmgate.kube.runner_endpoints import RunnerDocError
from warmgate.reconcile.planning.drift_seeds import bucket_of, parse_shape, propose
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.sync.decide_serving import proven_pods
from warmgate.reconcile.sync.drift import MAX_REMEMBERED, evaluate_drift
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.progress import compiled_fraction, plan_phases, progress_of, throttled

AT = datetime(2026, 11, 30, 10, 0, 0, tzinfo=UTC)


class Endpoints:
    """The runners' status documents, by Pod name (None: the Pod does not answer)."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any] | None] = {}
        self.reads: list[str] = []

    def read(self, pod: dict[str, Any]) -> RunnerBoard | None:
        """The answer as the HTTP reader hands it on (`runner_endpoints.parse_board`)."""
        name = pod["metadata"]["name"]
        self.reads.append(name)
        doc = self.docs.get(name)
        return read_board(doc) if doc is not None else None


@pytest.fixture
def world() -> World:
    return World(endpoints=Endpoints())


def _doc(key: str, prompt: tuple[int, int], decode: tuple[int, int], elapsed: float) -> Any:
    """A warmup runner's answer on its status port."""
    progress = {"prompt": list(prompt), "decode": list(decode)}
    return {
        "mode": "warmup",
        "key": key,
        "stage": "engine",
        "progress": progress,
        "elapsed_s": elapsed,
    }


def _board(*args: Any) -> WarmupBoard:
    """That answer as the sync reads it."""
    return WarmupBoard.from_json(_doc(*args))


# ---- pure rules -----------------------------------------------------------------------


def test_progress_counts_both_phases_and_extrapolates_the_rate() -> None:
    doc = _board("k", (34, 34), (57, 189), 120.0)
    found = progress_of(doc, planned=223, estimate_s=337, key="k", at=AT)
    assert found is not None
    assert (found.warmed_buckets, found.planned_buckets, found.percent) == (91, 223, 40)
    assert (found.phase, found.stage, found.elapsed_seconds) == ("decode", "engine", 120)
    assert found.estimated_remaining_seconds == round(120 * 132 / 91)


def test_the_compiled_fraction_weighs_each_phase_by_its_estimated_seconds() -> None:
    # Issue 37 item 2: 10 prompt buckets of 4 s, 90 decode buckets of 0.67 s (40 s and 60 s):
    # all prompt buckets and 9 decode ones are 46 of 100 s, though 19 of 100 buckets.
    phases = ((10, 40.0), (90, 60.0))
    doc = _board("k", (10, 10), (9, 90), 60.0)
    found = progress_of(doc, planned=100, estimate_s=100, key="k", at=AT, phases=phases)
    assert found is not None
    assert found.percent == 19
    assert found.compiled_fraction == pytest.approx(0.46)
    assert compiled_fraction({"prompt": (5, 10)}, phases) == pytest.approx(0.2)
    assert compiled_fraction({"prompt": (10, 10), "decode": (90, 90)}, phases) == 1.0
    assert compiled_fraction({"prompt": (1, 1)}, ((0, 0.0), (0, 0.0))) is None


def test_a_plans_phase_costs_weigh_a_prompt_bucket_above_a_decode_bucket() -> None:
    result = evaluate(example_sdd("llama31-8b-eagle3-gaudi2"))
    assert result.plan is not None
    (prompts, prompt_s), (decodes, decode_s) = plan_phases(result.plan)
    assert (prompts, decodes) == (len(result.plan.prompt_buckets), len(result.plan.decode_buckets))
    assert prompt_s / prompts > decode_s / decodes > 0
    assert plan_phases(result.plan) == ((prompts, prompt_s), (decodes, decode_s))  # cached


def test_before_the_first_bucket_the_estimate_gives_the_remaining_time() -> None:
    doc = WarmupBoard.from_json({"mode": "warmup", "key": "k", "stage": "facts", "elapsed_s": 30.0})
    found = progress_of(doc, planned=223, estimate_s=337, key="k", at=AT)
    assert found is not None
    assert (found.warmed_buckets, found.percent, found.estimated_remaining_seconds) == (0, 0, 307)


def test_another_plans_runner_is_ignored() -> None:
    assert (
        progress_of(_board("old", (1, 2), (0, 9), 1), planned=9, estimate_s=1, key="k", at=AT)
        is None
    )


def test_a_progress_younger_than_ten_seconds_is_kept_unless_the_stage_moved() -> None:
    old = WarmupProgress(stage="engine", warmed_buckets=10, update_time=AT)
    new = WarmupProgress(stage="engine", warmed_buckets=20, update_time=AT + timedelta(seconds=9))
    assert throttled(old, new, AT + timedelta(seconds=9)) is old
    assert throttled(old, new, AT + timedelta(seconds=10)) is new
    probe = WarmupProgress(stage="probe", warmed_buckets=20, update_time=AT + timedelta(seconds=2))
    assert throttled(old, probe, AT + timedelta(seconds=2)) is probe
    assert throttled(old, None, AT) is old  # a Pod that does not answer keeps the last one


def test_shapes_map_back_to_buckets() -> None:
    assert parse_shape("('decode', 24, 1, 768)") == ("decode", 24, 1, 768)
    assert parse_shape("(decode, 24, 1, 768)") is None  # the runner normalises to the repr
    assert parse_shape("('drafter', 1, 2, 3)") is None
    assert bucket_of(("decode", 24, 1, 768)) == (24, 1, 768)
    assert bucket_of(("prompt", 2, 256, 8)) == (2, 256, 4)  # ('prompt', b, q, b*c)
    assert bucket_of(("prompt", 3, 256, 8)) is None


def test_the_proposal_is_proven_by_replanning() -> None:
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=2)
    plan = plan_buckets(config)
    assert (3, 1, 40) not in plan.decode_buckets
    seeds, text = propose(plan, ["('decode', 3, 1, 40)", "('decode', 24, 1, 768)"])
    assert seeds is not None
    assert seeds.decode == [[3, 1, 40]]  # (24, 1, 768) is planned already: no seed for it
    assert "makes warmup cover them" in text
    none, said = propose(plan, ["('decode', 24, 1, 768)"])
    assert none is None
    assert said == "The current plan already warms these shapes"
    dropped, why = propose(plan, ["('decode', 64, 1, 2)"])  # bs > blocks: the filter drops it
    assert dropped is None
    assert "1 shape(s) no seed can cover" in why


def _serving(*shapes: int) -> ServeBoard:
    """A serve-mode board listing decode shapes (b, 1, 40), as a Pod's runner reports them."""
    listed = [f"('decode', {b}, 1, 40)" for b in shapes]
    return ServeBoard.from_json(
        {"mode": "serve", "unwarmed": listed, "unwarmed_count": len(listed)}
    )


def test_shapes_beyond_the_remembered_ones_are_counted_once() -> None:
    # 25 shapes were counted 25 -> 30 -> 35 -> 40: the 5 the record cannot remember looked
    # new at every sync, each time with an Event and a re-plan of the proposal.
    record, counts, news = None, [], []
    for _ in range(4):
        state = evaluate_drift(record, [_serving(*range(1, 26))], served="p", plan=None, at=AT)
        record = state.summary
        assert record is not None
        counts.append(record.unwarmed_shapes)
        news.append(len(state.new_shapes))
    assert MAX_REMEMBERED == 20
    assert counts == [25, 25, 25, 25]
    assert news == [25, 0, 0, 0]
    assert len(record.shapes or []) == MAX_REMEMBERED
    state = evaluate_drift(record, [_serving(*range(1, 27))], served="p", plan=None, at=AT)
    assert state.summary is not None
    assert (state.summary.unwarmed_shapes, state.new_shapes) == (26, ("('decode', 26, 1, 40)",))


def test_two_pods_reporting_the_same_unremembered_shapes_count_them_once() -> None:
    record = evaluate_drift(None, [_serving(*range(1, 24))], served="p", plan=None, at=AT).summary
    both = [_serving(*range(1, 24)), _serving(*range(18, 24))]
    for _ in range(2):
        record = evaluate_drift(record, both, served="p", plan=None, at=AT).summary
    assert record is not None
    assert record.unwarmed_shapes == 23
    # A new Pod that ran only shapes the record cannot list does not lower the count, and a
    # Pod's own count (its list is capped at 1000 shapes) is a floor.
    again = evaluate_drift(record, [_serving(22, 23)], served="p", plan=None, at=AT).summary
    assert again is not None
    assert again.unwarmed_shapes == 23
    many = ServeBoard.from_json({"mode": "serve", "unwarmed": [], "unwarmed_count": 1500})
    capped = evaluate_drift(record, [many], served="p", plan=None, at=AT).summary
    assert capped is not None
    assert capped.unwarmed_shapes == 1500


def test_the_proposal_is_planned_again_only_when_the_remembered_shapes_change(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plan = plan_buckets(
        EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=2)
    )
    plannings: list[int] = []

    def counted(plan: Any, shapes: list[str]) -> Any:
        plannings.append(len(shapes))
        return propose(plan, shapes)

    monkeypatch.setattr("warmgate.reconcile.sync.drift.propose", counted)
    record = None
    for upto in (25, 25, 26, 26):
        record = evaluate_drift(
            record, [_serving(*range(1, upto + 1))], served="p", plan=plan, at=AT
        ).summary
    assert record is not None
    assert plannings == [MAX_REMEMBERED]  # the 26th shape cannot be listed: no new proposal
    assert record.proposed_seeds is not None


# ---- the sync -------------------------------------------------------------------------


def test_the_running_warmups_progress_reaches_the_status_at_a_bounded_rate(
    world: World,
) -> None:
    world.sync()
    pod = world.running_warmup()
    world.endpoints.docs[pod] = _doc(world.key(), (34, 34), (10, 189), 60.0)
    patch = world.sync().status_patch
    progress = patch["warmup"]["progress"]
    assert progress["warmedBuckets"] == 44
    assert 0 < progress["compiledFraction"] < 1
    assert progress["plannedBuckets"] == world.sdd.status.plan.total_buckets  # type: ignore[union-attr]
    assert patch["warmup"]["warmedBuckets"] == 44
    world.endpoints.docs[pod] = _doc(world.key(), (34, 34), (20, 189), 61.0)
    assert world.sync().status_patch == {}  # the next resync within 10 s writes nothing
    status = world.sdd.status
    assert status is not None
    assert status.warmup is not None
    assert status.warmup.progress is not None
    earlier = status.warmup.progress.model_copy(
        update={"update_time": status.warmup.progress.update_time - timedelta(seconds=11)}  # type: ignore[operator]
    )
    world.sdd = world.sdd.model_copy(
        update={
            "status": status.model_copy(
                update={"warmup": status.warmup.model_copy(update={"progress": earlier})}
            )
        }
    )
    assert world.sync().status_patch["warmup"]["progress"]["warmedBuckets"] == 54


def _merge(target: Any, patch: Any) -> Any:
    """What the API server does with a JSON merge patch (RFC 7386, section 2)."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = _merge(merged.get(key), value)
    return merged


def _stored(status: SpecDecodeDeploymentStatus | None) -> dict[str, Any]:
    assert status is not None
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


def test_a_finished_warmups_progress_leaves_the_stored_status(world: World) -> None:
    # The server keeps what a merge patch does not null: status.warmup.progress stayed at 3
    # buckets on a verified (or failed) object, and every sync sent the same patch again.
    world.sync()
    pod = world.running_warmup()
    world.endpoints.docs[pod] = _doc(world.key(), (3, 34), (0, 189), 120.0)
    stored = _merge(_stored(world.sdd.status), world.sync().status_patch)
    assert stored["warmup"]["progress"]["warmedBuckets"] == 3
    world.succeed()
    patch = world.sync().status_patch
    assert patch["warmup"]["progress"] is None
    stored = _merge(stored, patch)
    assert "progress" not in stored["warmup"]
    assert stored == _stored(world.sdd.status)
    world.sdd = world.sdd.model_copy(
        update={"status": SpecDecodeDeploymentStatus.model_validate(stored)}
    )
    assert world.sync().status_patch == {}  # read back from the server, nothing is left to write


def test_drift_while_serving_is_recorded_announced_and_proposed(world: World) -> None:
    world.sync()
    world.verify()
    world.serve()
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    world.events.clear()
    serve_doc = {"mode": "serve", "unwarmed": ["('decode', 3, 1, 40)"], "not_prepared_count": 1}
    world.endpoints.docs["served-a"] = serve_doc
    patch = world.sync().status_patch
    drift = patch["drift"]
    assert (drift["unwarmedShapes"], drift["notPrepared"]) == (1, 1)
    assert drift["shapes"] == ["('decode', 3, 1, 40)"]
    assert drift["proposedSeeds"] == {"decode": [[3, 1, 40]]}
    assert drift["planHash"] == world.sdd.status.serving.plan_hash  # type: ignore[union-attr]
    assert world.conditions()["Ready"] == ("True", "UnwarmedShapeObserved")
    assert world.events.reasons() == ["UnwarmedShapeObserved"]
    assert "('decode', 3, 1, 40)" in world.events.posted[0][2]
    world.events.clear()
    assert world.sync().status_patch == {}  # nothing new: no write, no Event
    assert world.events.posted == []
    world.endpoints.docs["served-a"] = {"mode": "serve", "unwarmed": []}  # the Pod restarted
    world.sync()
    assert world.sdd.status.drift.unwarmed_shapes == 1  # type: ignore[union-attr]  # the record stays


def test_the_engines_acceptance_reaches_status_serving(world: World) -> None:
    world.sync()
    world.verify()
    world.serve("served-a")
    world.serve("served-b")
    world.sync()
    counters = {"drafts": 30, "draft_tokens": 60, "accepted_tokens": 60}
    world.endpoints.docs["served-a"] = {"mode": "serve", "unwarmed": [], "spec_decode": counters}
    world.endpoints.docs["served-b"] = {"mode": "serve", "unwarmed": [], "spec_decode": None}
    measured = world.sync().status_patch["serving"]["specDecode"]
    assert (measured["acceptanceRate"], measured["meanAcceptanceLength"]) == (1.0, 3.0)
    assert (measured["draftTokens"], measured["acceptedTokens"], measured["pods"]) == (60, 60, 1)
    # the counters did not move, nor would a write within 30 s
    assert world.sync().status_patch == {}
    world.endpoints.docs.clear()  # no Pod answers: the record stays
    world.sync()
    assert world.sdd.status.serving.spec_decode.acceptance_rate == 1.0  # type: ignore[union-attr]


def test_a_pod_that_does_not_answer_changes_nothing(world: World) -> None:
    world.sync()
    world.verify()
    world.serve()
    world.sync()
    assert world.endpoints.reads  # the serving Pod was asked
    assert world.sdd.status is not None
    assert world.sdd.status.drift is None
    assert world.sdd.status.serving is not None
    assert world.sdd.status.serving.spec_decode is None
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")


def test_slow_runners_share_one_read_budget_per_sync(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    world.sync()
    world.verify()
    world.serve("served-a")
    world.serve("served-b")
    clock = iter(range(0, 100, 3))  # every read seems to take 3 s
    monkeypatch.setattr("warmgate.runtime.gather.monotonic", lambda: next(clock))
    world.endpoints.reads.clear()
    world.sync()
    assert world.endpoints.reads == ["served-a"]  # the budget of 5 s ran out after one Pod


def test_runner_reports_are_read_only_from_the_operators_own_pods(world: World) -> None:
    """A Pod with the serving labels and plan annotations, but not of the Deployment's
    ReplicaSets, or on the node's network, is never asked (issue 23 item 4)."""
    world.sync()
    world.verify()
    deployment = world.serve("served-a")
    stranger = world.cluster.get("Pod", NS, "served-a")
    forged = copy.deepcopy(stranger)
    forged["metadata"].update(name="forged", uid="forged-uid")
    forged["metadata"]["ownerReferences"][0]["uid"] = "another-rs"
    world.cluster.put(forged)
    del deployment
    world.endpoints.reads.clear()
    world.sync()
    assert world.endpoints.reads == ["served-a"]


def test_a_malformed_runner_report_is_a_warning_not_a_failed_sync(
    world: World, caplog: pytest.LogCaptureFixture
) -> None:
    world.sync()
    world.verify()
    world.serve("served-a")
    world.endpoints.docs["served-a"] = {"mode": "serve", "not_prepared_count": "many"}
    world.sync()
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")

    def refuse(pod: dict[str, Any]) -> dict[str, Any] | None:
        raise RunnerDocError("nested deeper than 8 levels")

    world.endpoints.read = refuse  # type: ignore[method-assign]
    world.sync()
    assert "Ignored the runner status of Pod served-a: nested deeper" in caplog.text
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")


def test_a_pod_made_to_look_like_a_serving_pod_gets_no_gate_and_no_say(world: World) -> None:
    """Issue 34 case 3: a Pod made by a namespace user with the serving labels and
    annotations and a controller owner reference to the serving ReplicaSet, running its own
    image: its gate stays closed, and what its board says reaches neither status.drift nor an
    Event nor Ready (its board is not even asked for)."""
    world.sync()
    world.verify()
    world.serve("served-a")
    world.sync()
    forged = copy.deepcopy(world.cluster.get("Pod", NS, "served-a"))
    forged["metadata"].update(name="forged", uid="forged-uid")
    for container in forged["spec"]["containers"]:
        container["image"] = "attacker.example/board:1"
    forged.pop("status", None)
    world.cluster.put(forged)
    world.cluster.get("Pod", NS, "forged")["status"] = {"phase": "Running", "podIP": "10.0.0.66"}
    world.endpoints.docs["forged"] = {
        "mode": "serve",
        "unwarmed": ["('decode', 3, 1, 40)"],
        "unwarmed_count": 1,
    }
    world.endpoints.reads.clear()
    world.sync()
    world.sync()
    assert "forged" not in world.endpoints.reads
    gated = world.cluster.get("Pod", NS, "forged")["status"].get("conditions") or []
    assert not any(c.get("type") == "warmgate.dev/warmed" for c in gated)
    assert world.sdd.status is not None
    assert world.sdd.status.drift is None
    assert world.conditions()["Ready"] == ("True", "ReplicasReady")
    assert "UnwarmedShapeObserved" not in world.events.reasons()


def test_decisions_count_only_proven_pods_whatever_gather_read(world: World) -> None:
    """The rule is the decision's (`proven_pods`), not only the reads': of two Pods the
    ReplicaSet controls, the one that does not run the operator's template is not proven."""
    world.sync()
    world.verify()
    world.serve("served-a")
    world.sync()
    honest = world.cluster.get("Pod", NS, "served-a")
    forged = copy.deepcopy(honest)
    forged["metadata"].update(name="forged", uid="forged-uid")
    forged["spec"]["containers"][0]["args"] = ["--serve-something-else"]
    deployment = world.cluster.get("Deployment", NS, f"{NAME}-serving")
    replica_sets = tuple(world.cluster.of_kind("ReplicaSet"))
    observed = Observed(at=AT, serving_pods=(honest, forged), replica_sets=replica_sets)
    template = deployment["spec"]["template"]
    proven = proven_pods(observed, deployment, template)
    assert [p["metadata"]["name"] for p in proven] == ["served-a"]
    assert proven_pods(observed, deployment, None) == []  # no template derived: none proven


def test_the_warmed_count_holds_from_the_runners_end_to_the_verdict(world: World) -> None:
    # Issue 37 item 4: between the runner's end and the Job controller's count of it (the Pod's
    # tracking finalizer removed, status.succeeded not yet 1) the sync sees no Pod of the Job;
    # status.warmup lost warmedBuckets and its progress there: all -> 0 -> all buckets.
    world.sync()
    assert world.sdd.status is not None
    plan = world.sdd.status.plan
    assert plan is not None
    prompt, decode, total = plan.prompt_buckets, plan.spec_decode_buckets, plan.total_buckets
    assert prompt is not None
    assert decode is not None
    assert total is not None
    pod = world.running_warmup()
    world.endpoints.docs[pod] = _doc(world.key(), (prompt, prompt), (decode, decode), 300.0)
    stored = _merge(_stored(world.sdd.status), world.sync().status_patch)
    assert (stored["warmup"]["warmedBuckets"], total) == (prompt + decode, prompt + decode)
    assert stored["warmup"]["progress"]["percent"] == 100
    job = world.job()
    meta, template = job["metadata"], job["spec"]["template"]
    ended = warmup_pod(NS, meta["name"], meta["uid"], template=template, tracked=False)
    ended["status"] = terminated_status(runner_summary("verified", world.key()), True)
    world.cluster.put(ended)  # the Job's status counts it in uncountedTerminatedPods only
    stored = _merge(stored, world.sync().status_patch)
    assert stored["warmup"]["warmedBuckets"] == total
    assert stored["warmup"]["progress"]["percent"] == 100
    world.cluster.get("Job", NS, meta["name"])["status"] = job_status(True)
    stored = _merge(stored, world.sync().status_patch)
    assert world.conditions()["Warmed"] == ("True", "WarmupSucceeded")
    assert stored["warmup"]["warmedBuckets"] == total
    assert "progress" not in stored["warmup"]
