"""One sync of a SpecDecodeDeployment: plan, warm, serve, collect garbage, report the status.

The kopf handlers call `sync` for every event and on the resync timer. It writes
BucketsPlanned=Unknown (Planning) before planning a generation the status does not describe
yet (unless its plan is already known, e.g. another object's of the same inputs), then
orders the steps (`warm_stage.warm`, `serve_stage.serve`, `garbage.collect`), which
read the children through the cluster adapter and decide with the pure state machines
(`warmup_state`, `serving_state`). An API failure keeps the last known state of the step it
hit, skips the garbage collection, and asks the caller to retry after a backoff
(`Outcome.retry_after`). What the runners in the Pods report (warmup progress, unwarmed shapes
while serving) is read through their status endpoints (`observation`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition, now
from warmgate.api.constants import COVERAGE_PROVEN
from warmgate.reconcile.backoff import Backoff
from warmgate.reconcile.cluster import Cluster, ClusterError, Events, EventType, Logger
from warmgate.reconcile.drift import DriftState
from warmgate.reconcile.garbage import collect
from warmgate.reconcile.observation import announce_drift, serving_drift
from warmgate.reconcile.plan_cache import PlanCache
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.progress import NoEndpoints, RunnerEndpoints
from warmgate.reconcile.serve_stage import serve
from warmgate.reconcile.serving_state import ServingState
from warmgate.reconcile.stage import Stage
from warmgate.reconcile.status_builder import build_status, planning_notice, status_patch
from warmgate.reconcile.verdict import one_line
from warmgate.reconcile.warm_stage import warm
from warmgate.resources import serving_selector
from warmgate.settings import Settings


@dataclass(frozen=True)
class Runtime:
    """What every sync shares: the settings, the cluster adapter, planning results, the reader
    of the runners' status endpoints (progress, serving drift) and the retry backoff."""

    settings: Settings
    cluster: Cluster
    plans: PlanCache
    endpoints: RunnerEndpoints = field(default_factory=NoEndpoints)
    backoff: Backoff = field(default_factory=Backoff)


@dataclass(frozen=True)
class Outcome:
    """What one sync found: the planning result, the new status and the patch that writes it.

    ``retry_after``: seconds to wait before the next sync, after an API failure (None: the
    regular resync is soon enough).
    """

    result: PlanningResult
    status: SpecDecodeDeploymentStatus
    status_patch: dict[str, Any]
    retry_after: float | None = None


def sync(
    sdd: SpecDecodeDeployment,
    runtime: Runtime,
    events: Events,
    log: Logger,
    at: datetime | None = None,
) -> Outcome:
    """Plan (once per generation), warm the plan, serve verified plans, report it all."""
    stage = Stage(sdd, runtime.cluster, events, log, runtime.settings, at or now())
    stage.endpoints = runtime.endpoints
    # The notice is for a planning that takes time: a known plan is at hand at once.
    written = None if runtime.plans.known(sdd) else _notice(stage)
    result = runtime.plans.get(sdd)
    warmed = warm(stage, result)
    serving = serve(stage, warmed.verified, result)
    drift = _drift(stage, result, serving, runtime.endpoints)
    # An object's first sync (no status yet) has nothing superseded to collect: its children
    # are all of this plan (a crash's leftovers of an edited spec wait for the next sync).
    if not stage.errors and sdd.status is not None and sdd.status.conditions:
        try:
            collect(stage, warmed.children)
        except ClusterError as exc:
            stage.failed("Could not collect superseded children", exc)
    status = build_status(sdd, result, stage.at, warmup=warmed.state, serving=serving, drift=drift)
    _announce(sdd.status, result, events, log)
    announce_drift(drift, events)
    retry = runtime.backoff.after(stage.uid, stage.errors)
    return Outcome(result, status, status_patch(written or sdd.status, status), retry)


def _drift(
    stage: Stage, result: PlanningResult, serving: ServingState | None, endpoints: RunnerEndpoints
) -> DriftState:
    """What the serving Pods' runners counted; the record stays when they cannot be listed."""
    try:
        return serving_drift(
            stage.sdd,
            result,
            serving,
            cluster=stage.cluster,
            endpoints=endpoints,
            selector=serving_selector(stage.sdd),
        )
    except ClusterError as exc:
        stage.failed("Could not list the serving Pods", exc)
        return DriftState(stage.old.drift)


def _notice(stage: Stage) -> SpecDecodeDeploymentStatus | None:
    """Write BucketsPlanned=Unknown (Planning) first when this generation is new to the status,
    so planning, however long, never leaves the object without a status. Returns the status
    written (the final patch is computed against it), None when nothing was written."""
    notice = planning_notice(stage.sdd, stage.at)
    if notice is None:
        return None
    body = status_patch(stage.sdd.status, notice)
    try:
        stage.cluster.patch_status(stage.namespace, stage.sdd.metadata.name or "", body)
    except ClusterError as exc:
        stage.log.warning(f"Could not write the Planning status: {one_line(exc, 512)}")
        return None
    return notice


def _announce(
    old: SpecDecodeDeploymentStatus | None, result: PlanningResult, events: Events, log: Logger
) -> None:
    """An Event and a log line when the plan or the coverage verdict changed."""
    before = get_condition(old.conditions if old else None, COVERAGE_PROVEN)
    previous = (before.status, before.reason) if before else None
    plan_hash = old.plan.hash if old and old.plan else None
    new_hash = result.summary.hash if result.summary else None
    if previous == (result.coverage.status, result.coverage.reason) and plan_hash == new_hash:
        return
    if not result.planned.holds:
        events.post("Warning", result.planned.reason, result.planned.message)
        log.warning(f"Refused to plan SpecDecodeDeployment: {result.planned.message}")
        return
    kind: EventType = "Normal" if result.coverage.holds else "Warning"
    events.post(kind, result.coverage.reason, result.coverage.message)
    log.info(f"Planned SpecDecodeDeployment {new_hash}: {result.coverage.message}")
    if result.refused is not None:
        events.post("Warning", result.refused.reason, result.refused.message)
