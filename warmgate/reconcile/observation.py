"""What the runners in the Pods report, read during a sync: warmup progress and serving drift.

The runner answers ``GET /warmgate/status`` on its status port in the warmup Pod (progress)
and in every serving Pod (serve mode: unwarmed shapes). `RunnerEndpoints` reads it through the
Pod IP; nothing here needs API rights in the Pods, and a Pod that does not answer only leaves
the last recorded value in place.
"""

from __future__ import annotations

from dataclasses import replace
from time import monotonic
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.api.conditions import now
from warmgate.api.constants import LABEL_PLAN_HASH, Reason
from warmgate.reconcile.cluster import Cluster, Events
from warmgate.reconcile.drift import DriftState, evaluate_drift, event_message
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.progress import RunnerEndpoints, progress_of, running_pod, throttled
from warmgate.reconcile.serving_state import ServingState
from warmgate.reconcile.warmup_state import WarmupState
from warmgate.resources.names import plan_label

# Reading the serving Pods' runners shares one budget per sync: a namespace whose
# NetworkPolicy drops the status port costs at most this long per resync, not 2 s per replica.
READ_BUDGET_S: Final = 5.0


def with_progress(
    sdd: SpecDecodeDeployment,
    state: WarmupState,
    pods: list[Manifest],
    *,
    planned: int,
    estimate_s: float,
    endpoints: RunnerEndpoints,
) -> WarmupState:
    """The running warmup's progress in its summary (rate-limited); other states unchanged."""
    if state.verdict.reason != Reason.WARMUP_RUNNING:
        return state
    old = sdd.status.warmup.progress if sdd.status and sdd.status.warmup else None
    pod = running_pod(pods)
    doc = endpoints.read(pod) if pod is not None else None
    at, key = now(), state.summary.cache_key or ""
    fresh = None
    if doc is not None:
        fresh = progress_of(doc, planned=planned, estimate_s=estimate_s, key=key, at=at)
    if old is not None and sdd.status and sdd.status.warmup and sdd.status.warmup.cache_key != key:
        old = None  # another plan's progress
    progress = throttled(old, fresh, at)
    if progress is None:
        return state
    update = {"progress": progress, "warmed_buckets": progress.warmed_buckets}
    return replace(state, summary=state.summary.model_copy(update=update))


def serving_drift(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    serving: ServingState | None,
    *,
    cluster: Cluster,
    endpoints: RunnerEndpoints,
    selector: str,
) -> DriftState:
    """The drift record of the served plan, with what its Pods' runners report now."""
    old = sdd.status.drift if sdd.status else None
    if serving is None:  # the Deployment could not be read: keep the record
        return DriftState(old)
    served = serving.summary.plan_hash
    docs = []
    if served is not None:
        namespace = sdd.metadata.namespace or "default"
        deadline = monotonic() + READ_BUDGET_S
        for pod in cluster.list_pods(namespace, selector):
            if monotonic() > deadline:
                break  # the rest next sync; the record keeps what was read before
            labels = pod["metadata"].get("labels") or {}
            if labels.get(LABEL_PLAN_HASH) == plan_label(served) and running_pod([pod]):
                doc = endpoints.read(pod)
                if doc is not None:
                    docs.append(doc)
    return evaluate_drift(old, docs, served=served, plan=result.plan, at=now())


def announce_drift(drift: DriftState, events: Events) -> None:
    """A Warning Event naming the shapes seen for the first time."""
    message = event_message(drift)
    if message is not None:
        events.post("Warning", Reason.UNWARMED_SHAPE_OBSERVED, message)
