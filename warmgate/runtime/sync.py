"""One sync of a SpecDecodeDeployment: gather a snapshot, decide purely, apply every write.

    notice   the Planning status, before planning a generation the status does not describe
             (unless its plan is already known, e.g. another object's of the same inputs)
    plan     runtime.plans: the planning result, shared by every object with the same inputs
    gather   `gather.gather`: one snapshot of the children, Pods, Events and runner reports
    decide   `reconcile.decide.decide`: the writes and the whole status, pure
    apply    `apply.apply`: the writes, as this object may make them (the ownership rule);
             while the server's answers matter to the decision (a claim just created, a Job,
             a Deployment, a failure, a name found taken), decide again on the snapshot
             with the answers folded in, at most `MAX_ROUNDS` times, without reading again
    report   the decision's Events, and the status written when it changed

A failed read or write keeps what the status said about its part, skips the garbage
collection, and asks the caller to retry after a backoff (`Synced.retry_after`); a child
name that another object holds is retried the same way, until it is free. The status is
written at the resourceVersion the sync read (`apply.StatusVersion`): a newer writer (a spec
edit, another replica) makes it a 409, retried after the backoff from the newer object.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from pydantic import ValidationError

from warmgate.api import SpecDecodeDeployment, SpecDecodeDeploymentStatus
from warmgate.api.conditions import get_condition, now
from warmgate.api.constants import STALLED, Reason
from warmgate.api.resource import ObjectMeta
from warmgate.kube.children import parent_key
from warmgate.kube.cluster import Cluster, ClusterError, Events, Logger
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.reconcile.planning.verdict import Verdict
from warmgate.reconcile.sync.actions import Decision
from warmgate.reconcile.sync.decide import decide, decide_unreadable
from warmgate.reconcile.sync.observed import Observed
from warmgate.reconcile.sync.status_builder import planning_notice, stalled_status, status_patch
from warmgate.runtime.apply import StatusVersion, apply, write_status
from warmgate.runtime.backoff import Backoff
from warmgate.runtime.gather import NoEndpoints, RunnerEndpoints, gather
from warmgate.runtime.runner_watch import RunnerWatch
from warmgate.settings import ALLOW_OPERATOR_NAMESPACE_ENV, Settings

# A claim, then the warmup's children, then one look at what the server stored: three rounds
# do the work of an object's first sync; a fourth is a margin, never a loop.
MAX_ROUNDS: Final = 4
HTTP_NOT_FOUND: Final = 404
HTTP_CONFLICT: Final = 409


@dataclass(frozen=True)
class Runtime:
    """What every sync shares: the settings, the cluster adapter, planning results, the reader
    of the runners' status endpoints (progress, serving drift) and the retry backoff."""

    settings: Settings
    cluster: Cluster
    plans: PlanningCache
    endpoints: RunnerEndpoints = field(default_factory=NoEndpoints)
    backoff: Backoff = field(default_factory=Backoff)
    # The serving runners polled between syncs (`runner_watch`): the drift detection bound.
    watch: RunnerWatch = field(default_factory=RunnerWatch)


@dataclass(frozen=True)
class Synced:
    """What one sync found and wrote.

    ``status_patch``: the merge patch of the status (empty: nothing changed); ``written``: the
    server took it, leaving the object at resourceVersion ``version`` (None: unknown) in place
    of the versions ``replaced``. ``retry_after``: seconds to wait before the next sync, after a
    failure (None: the regular resync is soon enough). ``gone``: the object no longer exists
    (404).
    """

    result: PlanningResult
    status: SpecDecodeDeploymentStatus
    status_patch: dict[str, Any]
    retry_after: float | None = None
    written: bool = False
    gone: bool = False
    version: str | None = None
    replaced: frozenset[str] = frozenset()


def sync(
    sdd: SpecDecodeDeployment,
    runtime: Runtime,
    events: Events,
    log: Logger,
    at: datetime | None = None,
    *,
    version: str | None = None,
) -> Synced:
    """Plan (once per generation), warm the plan, serve verified plans, report it all; the
    status writes at ``version``, the object's resourceVersion as read (None: unconditional)."""
    at = at or now()
    uid = sdd.metadata.uid or ""
    writes = StatusVersion(version)
    # The notice is for a planning that takes time: a known plan is at hand at once.
    known = runtime.plans.known(sdd)
    written = None if known else _notice(sdd, runtime.cluster, log, at, writes)
    result = runtime.plans.get(sdd)
    observed, errors = gather(
        sdd, result, runtime.cluster, endpoints=runtime.endpoints, log=log, at=at
    )
    _note_runners(sdd, observed, runtime.watch)
    decision = decide(sdd, result, observed, runtime.settings)
    for _ in range(MAX_ROUNDS):
        if not decision.actions:
            break
        applied = apply(decision.actions, runtime.cluster, events, uid, log)
        errors += applied.errors
        if not applied.again:
            break
        observed = observed.after(applied)
        decision = decide(sdd, result, observed, runtime.settings)
    _report(decision, events, log)
    if observed.taken or _not_owned(decision.status):
        # retried until the name is free (a create's 409, or a listed child of another
        # controller); the status says whose it is
        errors.append(ClusterError(f"Child names taken: {sorted(observed.taken)}", status=409))
    return _write(
        sdd,
        runtime,
        result,
        decision.status,
        written=written,
        errors=errors,
        log=log,
        writes=writes,
    )


def _not_owned(status: SpecDecodeDeploymentStatus) -> bool:
    stalled = get_condition(status.conditions, STALLED)
    return stalled is not None and stalled.reason == Reason.NOT_OWNED


def _note_runners(sdd: SpecDecodeDeployment, observed: Observed, watch: RunnerWatch) -> None:
    """The serving runners this sync read (from the operator's own Pods), for the poll."""
    read = [
        (pod, doc) for pod in observed.serving_pods if (doc := observed.doc_of(pod)) is not None
    ]
    key = parent_key(sdd.metadata.namespace, sdd.metadata.name or "")
    watch.note(sdd.metadata.uid or "", key, read)


def _report(decision: Decision, events: Events, log: Logger) -> None:
    for event in decision.events:
        events.post(event.type, event.reason, event.message)
        if event.log is not None:
            (log.info if event.type == "Normal" else log.warning)(event.log)


def _write(
    sdd: SpecDecodeDeployment,
    runtime: Runtime,
    result: PlanningResult,
    status: SpecDecodeDeploymentStatus,
    *,
    written: SpecDecodeDeploymentStatus | None,
    errors: list[ClusterError],
    log: Logger,
    writes: StatusVersion,
) -> Synced:
    """Write the status when it changed; the outcome and when to retry."""
    uid = sdd.metadata.uid or ""
    patch, error = _put_status(runtime.cluster, sdd, written or sdd.status, status, writes)
    if error is not None and error.status == HTTP_NOT_FOUND:  # deleted unseen
        return Synced(result, status, patch, gone=True)
    if error is not None:
        _unwritten(error, log)
        retry = runtime.backoff.after(uid, [*errors, error])
        return Synced(result, status, patch, retry)
    retry = runtime.backoff.after(uid, errors)
    replaced = frozenset(writes.replaced)
    return Synced(
        result, status, patch, retry, written=bool(patch), version=writes.current, replaced=replaced
    )


def _unwritten(error: ClusterError, log: Logger) -> None:
    """Why the status was not written; the object is synced again after the backoff."""
    if error.status == HTTP_CONFLICT:  # a newer writer: the next sync reads what it wrote
        log.info("Did not write the status: the object changed since it was read; resyncing")
    else:
        log.error(f"Could not write the status, retrying: {error}")


def refused_namespace(sdd: SpecDecodeDeployment, settings: Settings) -> bool:
    """The object lives in the operator's own namespace, which serves none by default."""
    own = settings.operator_namespace
    return (
        own is not None and not settings.allow_operator_namespace and sdd.metadata.namespace == own
    )


def refuse_namespace(
    sdd: SpecDecodeDeployment, runtime: Runtime, log: Logger, version: str | None = None
) -> None:
    """An object in the operator's own namespace (issue 34 case 9): there `edit` grants
    `pods/exec` into the operator (its token writes every status) and its Lease, so its users
    would hold the operator. Stalled, reason OperatorNamespace, saying where to put it and
    how to allow it; nothing is read, planned, created or written but the status."""
    message = (
        f"SpecDecodeDeployments are not served in the operator's own namespace "
        f"{sdd.metadata.namespace}: whoever may edit there can exec into the operator; create "
        f"it in a namespace the operator watches, or set {ALLOW_OPERATOR_NAMESPACE_ENV}=true "
        "(the chart's allowOperatorNamespace)"
    )
    stalled = Verdict("True", Reason.OPERATOR_NAMESPACE, message)
    status = stalled_status(sdd.status, stalled, sdd.metadata.generation, now())
    error = _put_status(runtime.cluster, sdd, sdd.status, status, StatusVersion(version))[1]
    if error is not None:
        log.error(f"Could not write the status, retrying: {error}")


def keep_serving(
    raw: Mapping[str, Any], problem: str, runtime: Runtime, events: Events, log: Logger
) -> None:
    """An object whose spec this operator cannot read (stored under other validation rules):
    the same sync on what can be read of it (`decide.decide_unreadable`): its status says so
    (Stalled, reason InvalidSpec, naming the field) and what is verified keeps serving (the
    gates of the verified plan's Pods keep opening). Nothing else is read or written."""
    meta = ObjectMeta.model_validate(raw.get("metadata") or {})
    try:
        old = SpecDecodeDeploymentStatus.model_validate(raw.get("status") or {})
    except ValidationError:
        old = SpecDecodeDeploymentStatus()
    # Only its names and status are used (the children's names and selectors come from
    # metadata alone, the served record's digest from the status).
    shell = SpecDecodeDeployment.model_construct(metadata=meta, spec=None, status=old)  # type: ignore[arg-type]
    observed, _ = gather(shell, None, runtime.cluster, endpoints=NoEndpoints(), log=log, at=now())
    decision = decide_unreadable(shell, observed, problem)
    apply(decision.actions, runtime.cluster, events, meta.uid or "", log)
    _report(decision, events, log)
    version = str((raw.get("metadata") or {}).get("resourceVersion") or "") or None
    error = _put_status(runtime.cluster, shell, old, decision.status, StatusVersion(version))[1]
    if error is not None:
        log.error(f"Could not write the status, retrying: {error}")


def _put_status(
    cluster: Cluster,
    sdd: SpecDecodeDeployment,
    old: SpecDecodeDeploymentStatus | None,
    status: SpecDecodeDeploymentStatus,
    writes: StatusVersion,
) -> tuple[dict[str, Any], ClusterError | None]:
    """The one status writer: the merge patch from ``old`` to ``status``, written when not
    empty at the version ``writes`` holds; the patch and the error (None: written or none)."""
    patch = status_patch(old, status)
    if not patch:
        return patch, None
    namespace, name = sdd.metadata.namespace or "", sdd.metadata.name or ""
    return patch, write_status(cluster, namespace, name, patch, writes)


def _notice(
    sdd: SpecDecodeDeployment, cluster: Cluster, log: Logger, at: datetime, writes: StatusVersion
) -> SpecDecodeDeploymentStatus | None:
    """Write BucketsPlanned=Unknown (Planning) first when this generation is new to the status,
    so planning, however long, never leaves the object without a status. Returns the status
    written (the final patch is computed against it), None when nothing was written."""
    notice = planning_notice(sdd, at)
    if notice is None:
        return None
    error = _put_status(cluster, sdd, sdd.status, notice, writes)[1]
    if error is not None:
        log.warning(f"Could not write the Planning status: {' '.join(str(error).split())[:512]}")
        return None
    return notice
