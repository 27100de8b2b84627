"""One decision for a SpecDecodeDeployment: from what the sync saw, the writes and the status.

`decide(sdd, planning, observed, settings)` is pure: data in, data out. It orders the parts
(`decide_warmup`, `decide_serving`, `decide_collect`, the serving drift and the engines'
measured spec-decode acceptance), builds the whole
status (`status_builder`) and the Events the verdicts call for. The clock is the snapshot's
(``observed.at``). `warmgate.runtime.sync` gathers the snapshot, applies the decision, and
decides again on the server's answers while they matter (a claim just created, a Job, a
Deployment).
"""

from __future__ import annotations

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition
from warmgate.api.constants import COVERAGE_PROVEN, LABEL_PLAN_HASH, Reason
from warmgate.contract.board import ServeBoard
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.planning.verdict import MESSAGE_LIMIT, Verdict
from warmgate.reconcile.sync.acceptance import with_acceptance
from warmgate.reconcile.sync.actions import Action, Decision, Delete, Event, EventType
from warmgate.reconcile.sync.decide_collect import decide_collect
from warmgate.reconcile.sync.decide_serving import (
    decide_serving,
    open_gates,
    proven_owners,
    serving_template,
)
from warmgate.reconcile.sync.decide_warmup import decide_warmup
from warmgate.reconcile.sync.drift import DriftState, drift_events, evaluate_drift
from warmgate.reconcile.sync.observed import Observed, controlled, controlled_by, uid_of
from warmgate.reconcile.sync.progress import running_pod
from warmgate.reconcile.sync.served import kept_digest, read_record
from warmgate.reconcile.sync.status_builder import build_status, stalled_status
from warmgate.reconcile.sync.subject import subject
from warmgate.resources.names import plan_label
from warmgate.resources.served_record import served_record_name
from warmgate.settings import Settings


def decide(
    sdd: SpecDecodeDeployment, planning: PlanningResult, observed: Observed, settings: Settings
) -> Decision:
    """The writes that bring the children to the plan, and the status that reports it all.
    What every part asks of the object (its names) and of the served record is read once."""
    announced = announce(sdd.status, planning)  # the planning's own Events: no snapshot needed
    of = subject(sdd, planning, observed)
    warm = decide_warmup(sdd, observed, settings, of)
    verified = warm.state.summary if warm.state is not None and warm.verified else None
    serve = decide_serving(sdd, planning, observed, warm.verified, verified, of=of)
    # The serving runners' boards: the drift and the measured acceptance of the served plan;
    # unread (no serving state, or its Pods could not be read), the status keeps its records.
    served = serve.state.summary.plan_hash if serve.state is not None else None
    docs = _served_docs(observed, served, serve.proven)
    unread = serve.state is None or "drift" in observed.failed
    old = sdd.status or SpecDecodeDeploymentStatus()
    drift = (
        DriftState(old.drift)
        if unread
        else evaluate_drift(old.drift, docs, served=served, plan=planning.plan, at=observed.at)
    )
    drifted = drift_events(drift)
    serving = with_acceptance(serve.state, old.serving, docs, unread=unread, at=observed.at)
    actions: tuple[Action, ...] = (*warm.actions, *serve.actions)
    gone = {uid_of(a.target) for a in actions if isinstance(a, Delete)}
    collect = decide_collect(of, observed, warm.children)
    actions += tuple(a for a in collect if uid_of(a.target) not in gone)  # type: ignore[union-attr]
    status = build_status(
        sdd, planning, observed.at, warmup=warm.state, serving=serving, drift=drift
    )
    events = (*announced, *drifted)
    return Decision(actions, status, events)


def decide_unreadable(shell: SpecDecodeDeployment, observed: Observed, problem: str) -> Decision:
    """An object whose spec this operator cannot read (stored under other validation rules;
    ``shell`` has its metadata and status only): Stalled, reason InvalidSpec, naming the
    field, and what is verified keeps serving: the gates of the Deployment's Pods that run the
    verified plan, as its served record (bound to the status' digest) keeps the Pods' template,
    keep opening, so a replaced serving Pod is not left unready. Without a record, no gate."""
    deployment = observed.deployment
    actions: tuple[Action, ...] = ()
    uid = shell.metadata.uid or ""
    if deployment is not None and controlled_by(deployment, uid):
        mine = controlled(observed, uid)
        name, digest = served_record_name(shell), kept_digest(shell)
        record = read_record(name, mine, digest, observed).record
        template = serving_template(None, record)
        proven = proven_owners(observed, deployment, template)
        actions = tuple(open_gates(observed, deployment, proven))
    message = (
        f"This operator cannot read the spec (stored under other validation rules?): "
        f"{' '.join(problem.split())}; the last verified plan keeps serving"
    )[:MESSAGE_LIMIT]
    stalled = Verdict("True", Reason.INVALID_SPEC, message)
    status = stalled_status(shell.status, stalled, shell.metadata.generation, observed.at)
    return Decision(actions, status)


def _served_docs(
    observed: Observed, served: str | None, proven: frozenset[str]
) -> list[ServeBoard]:
    """The serve-mode boards of the served plan's Running serving Pods that the operator can
    prove it created (the only evidence a board is: issue 34 case 3)."""
    docs = []
    if served is not None:
        for pod in observed.serving_pods:
            if uid_of(pod) not in proven:
                continue
            labels = pod["metadata"].get("labels") or {}
            doc = observed.doc_of(pod)
            ours = labels.get(LABEL_PLAN_HASH) == plan_label(served) and running_pod([pod])
            if ours and isinstance(doc, ServeBoard):
                docs.append(doc)
    return docs


def announce(old: SpecDecodeDeploymentStatus | None, result: PlanningResult) -> tuple[Event, ...]:
    """Events when the plan or the coverage verdict changed."""
    before = get_condition(old.conditions if old else None, COVERAGE_PROVEN)
    previous = (before.status, before.reason) if before else None
    plan_hash = old.plan.hash if old and old.plan else None
    new_hash = result.summary.hash if result.summary else None
    if previous == (result.coverage.status, result.coverage.reason) and plan_hash == new_hash:
        return ()
    if not result.planned.holds:
        log = f"Refused to plan SpecDecodeDeployment: {result.planned.message}"
        return (Event("Warning", result.planned.reason, result.planned.message, log),)
    kind: EventType = "Normal" if result.coverage.holds else "Warning"
    log = f"Planned SpecDecodeDeployment {new_hash}: {result.coverage.message}"
    events = [Event(kind, result.coverage.reason, result.coverage.message, log)]
    if result.refused is not None:
        events.append(Event("Warning", result.refused.reason, result.refused.message))
    for warning in result.warnings:  # e.g. a reachable drafter crash (issue 25 item 5)
        note = f"Planned SpecDecodeDeployment {new_hash}: {warning.message}"
        events.append(Event("Warning", warning.reason, warning.message, note))
    return tuple(events)
