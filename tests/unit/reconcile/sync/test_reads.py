"""What a sync reads (`reconcile.reads`): a pure function of the object and of the snapshot
read so far, so the gatherer decides nothing. Data in, data out."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from support.examples import example_doc

from warmgate.api import (
    SpecDecodeDeployment,
    SpecDecodeDeploymentStatus,
    derive_phase,
    parse_manifest,
)
from warmgate.api.conditions import get_condition, set_condition
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.verdict import MESSAGE_LIMIT
from warmgate.reconcile.sync.decide import decide_unreadable
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.reads import job_reads, reads
from warmgate.resources.cache_claim import legacy_claim_name
from warmgate.resources.pod import cache_claim_name

NS, NAME, UID = "llm", "read", "6f1c2d3e-0000-4000-8000-0000000000dd"
AT = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def sdd_with(cache: dict[str, Any], status: bool = False) -> SpecDecodeDeployment:
    doc = example_doc("llama31-8b-seeds")
    doc["metadata"].update(name=NAME, namespace=NS, uid=UID, generation=1)
    doc["spec"]["warmup"] = {**(doc["spec"].get("warmup") or {}), "cache": cache}
    sdd = parse_manifest(doc)
    if not status:
        return sdd
    conditions = set_condition([], "Ready", "False", "Warming", "warming", generation=1, at=AT)
    return sdd.model_copy(update={"status": SpecDecodeDeploymentStatus(conditions=conditions)})


def test_a_first_sync_reads_the_claim_and_no_garbage() -> None:
    sdd = sdd_with({"claimTemplate": {"size": "10Gi"}})
    todo = reads(sdd, evaluate(sdd), Observed(at=AT))
    assert todo.claim == cache_claim_name(sdd)
    assert todo.legacy_claim == legacy_claim_name(sdd)  # the spec's claim is not read yet
    assert todo.serving_pods is None  # no Deployment, nothing to collect
    assert not todo.garbage
    assert todo.jobs == []


def test_an_object_with_a_status_collects_unless_a_read_failed() -> None:
    sdd = sdd_with({"claimTemplate": {"size": "10Gi"}}, status=True)
    seen = Observed(at=AT)
    assert reads(sdd, evaluate(sdd), seen).garbage
    assert reads(sdd, evaluate(sdd), seen).serving_pods == "collect"
    failed = replace(seen, failed={"warmup": "Could not read the warmup Jobs"})
    assert not reads(sdd, evaluate(sdd), failed).garbage


def test_a_found_claim_is_not_looked_for_under_the_old_name() -> None:
    sdd = sdd_with({"claimTemplate": {"size": "10Gi"}})
    claim = {"metadata": {"name": cache_claim_name(sdd), "uid": "c"}}
    assert reads(sdd, evaluate(sdd), replace(Observed(at=AT), claim=claim)).legacy_claim is None


def test_without_a_readable_spec_nothing_of_the_warmup_is_read() -> None:
    sdd = sdd_with({"claimTemplate": {"size": "10Gi"}}, status=True)
    todo = reads(sdd, None, Observed(at=AT))
    assert todo.claim is None
    assert not todo.cache_users
    assert todo.jobs == []


def test_a_job_without_a_running_pod_has_its_events_read() -> None:
    job = {"metadata": {"name": "j", "uid": "job-uid"}, "spec": {}, "status": {}}
    pending = {"metadata": {"name": "p"}, "status": {"phase": "Pending"}}
    running = {"metadata": {"name": "p"}, "status": {"phase": "Running", "podIP": "10.0.0.9"}}
    assert job_reads(job, (pending,)) == (None, True)
    # a Running Pod the Job controller does not track: no runner asked, no Events either
    assert job_reads(job, (running,)) == (None, False)


def test_an_unreadable_spec_reads_its_served_plan_alone_and_decides_a_stalled_status() -> None:
    """keep_serving is a case of the one sync: reads (no warmup, no garbage), then a decision
    whose status `status_builder` builds (Stalled InvalidSpec, the message cut to its limit)."""
    sdd = sdd_with({"claimTemplate": {"size": "10Gi"}}, status=True)
    meta, status = sdd.metadata, sdd.status
    shell = SpecDecodeDeployment.model_construct(metadata=meta, spec=None, status=status)  # type: ignore[arg-type]
    todo = reads(shell, None, Observed(at=AT))
    assert not todo.warmup
    assert not todo.garbage
    assert todo.served_record is None
    decision = decide_unreadable(shell, Observed(at=AT), "spec.engine.maxNumSeqs: " + "x" * 5000)
    assert decision.actions == ()  # no Deployment of its own: no gate to open
    stalled = get_condition(decision.status.conditions, "Stalled")
    assert stalled is not None
    assert (stalled.status, stalled.reason) == ("True", "InvalidSpec")
    assert stalled.message.startswith("This operator cannot read the spec")
    assert len(stalled.message) == MESSAGE_LIMIT
    assert decision.status.phase == derive_phase(decision.status.conditions)
