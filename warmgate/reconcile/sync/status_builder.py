"""The whole status of a SpecDecodeDeployment from the stages' verdicts (conditions, kstatus).

kstatus (sigs.k8s.io/cli-utils pkg/kstatus, what Flux, Argo CD and kpt read): Reconciling is
True while the current generation is not fully realised (planning, a warmup that waits or
runs, a rollout in progress) and Stalled is True only when nothing progresses until something
changes; they are never both True. Ready keeps describing the last realised generation while
a new one is realised: its observedGeneration stays there, so `kubectl wait
--for=condition=Ready` waits for the new generation, while Ready=True still says the Pods of
the last verified plan serve. A stage the sync could not read this time (a transient API
error) keeps what the status said before.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, get_args

from pydantic import BaseModel

from warmgate.api import (
    SpecDecodeDeployment,
    SpecDecodeDeploymentStatus,
    derive_phase,
    get_condition,
    set_condition,
)
from warmgate.api.conditions import remove_condition
from warmgate.api.constants import (
    BUCKETS_PLANNED,
    COVERAGE_PROVEN,
    READY,
    RECONCILING,
    STALLED,
    WARMED,
    Reason,
)
from warmgate.api.status import Condition
from warmgate.reconcile.planning.evaluate import PlanningResult
from warmgate.reconcile.planning.verdict import Verdict
from warmgate.reconcile.sync.drift import DriftState, with_drift
from warmgate.reconcile.sync.serving_state import ServingState
from warmgate.reconcile.sync.warmup_state import WarmupState


def build_status(
    sdd: SpecDecodeDeployment,
    result: PlanningResult,
    at: datetime | None = None,
    *,
    warmup: WarmupState | None = None,
    serving: ServingState | None = None,
    drift: DriftState | None = None,
) -> SpecDecodeDeploymentStatus:
    """The whole status from the planning result and, once they ran, the warmup and serving
    (Ready says so when the serving engines ran unwarmed shapes: ``drift``).

    ``serving`` None: the serving stage could not read the Deployment; Ready, status.serving
    and Reconciling keep their last known values.
    """
    old = sdd.status or SpecDecodeDeploymentStatus()
    gen = sdd.metadata.generation
    conditions: list[Condition] | None = old.conditions
    for type_, verdict in ((BUCKETS_PLANNED, result.planned), (COVERAGE_PROVEN, result.coverage)):
        conditions = _set(conditions, type_, verdict, gen, at)
    warmed = _warmed(result, warmup)
    conditions = _set(conditions, WARMED, warmed, gen, at)
    conditions = _ready(conditions, serving, warmed, gen, at, drift=drift)
    stalled = _stalled(result, warmup, serving)
    reconciling = None if stalled else _reconciling(warmed, serving)
    conditions = _kstatus(conditions, stalled, reconciling, keep=serving is None, gen=gen, at=at)
    return old.model_copy(
        update={
            "observed_generation": gen,
            "conditions": conditions,
            "phase": derive_phase(conditions),
            "plan": result.summary,
            "warmup": warmup.summary if warmup else old.warmup,
            "serving": serving.summary if serving else old.serving,
            "drift": drift.summary if drift else old.drift,
        }
    )


def planning_notice(
    sdd: SpecDecodeDeployment, at: datetime | None = None
) -> SpecDecodeDeploymentStatus | None:
    """The status written before planning a generation the status does not describe yet:
    BucketsPlanned=Unknown (Planning) and Reconciling, so a long plan never leaves the object
    without a status. None when the status already describes this generation."""
    old = sdd.status or SpecDecodeDeploymentStatus()
    gen = sdd.metadata.generation
    if old.observed_generation == gen and old.conditions:
        return None
    planning = Verdict(
        "Unknown", Reason.PLANNING, "Planning the buckets and proving coverage of this spec"
    )
    conditions = _set(old.conditions, BUCKETS_PLANNED, planning, gen, at)
    conditions = remove_condition(conditions, STALLED)
    work = Verdict("True", planning.reason, planning.message)
    conditions = _set(conditions, RECONCILING, work, gen, at)
    return old.model_copy(
        update={
            "observed_generation": gen,
            "conditions": conditions,
            "phase": derive_phase(conditions),
        }
    )


def stalled_status(
    old: SpecDecodeDeploymentStatus | None, stalled: Verdict, gen: int | None, at: datetime
) -> SpecDecodeDeploymentStatus:
    """The status of an object the operator does not sync (its spec unreadable, or in the
    operator's own namespace): Stalled with ``stalled``'s reason and message; the rest as it was."""
    old = old or SpecDecodeDeploymentStatus()
    conditions = _set(old.conditions, STALLED, stalled, gen, at)
    return old.model_copy(update={"conditions": conditions, "phase": derive_phase(conditions)})


def _warmed(result: PlanningResult, warmup: WarmupState | None) -> Verdict:
    if warmup is not None:
        return warmup.verdict
    if result.refused is not None:
        return result.refused
    return Verdict("Unknown", Reason.WARMUP_PENDING, "The warmup stage has not run")


def _ready(
    conditions: list[Condition],
    serving: ServingState | None,
    warmed: Verdict,
    gen: int | None,
    at: datetime | None,
    *,
    drift: DriftState | None,
) -> list[Condition]:
    old = get_condition(conditions, READY)
    if serving is None:
        return conditions if old is not None else _set(conditions, READY, _waiting(warmed), gen, at)
    ready = with_drift(serving.verdict, drift)
    return _set(conditions, READY, ready, _ready_generation(old, serving, gen), at)


def _ready_generation(old: Condition | None, serving: ServingState, gen: int | None) -> int | None:
    """The generation Ready describes: the current one once realised (or when Ready is False);
    while Pods of an earlier generation's plan serve, that earlier generation."""
    if gen is None or serving.realised or serving.verdict.status != "True":
        return gen
    if old is not None and old.status == "True" and old.observed_generation is not None:
        return min(old.observed_generation, gen)
    return max(gen - 1, 0)  # no record of which one: an earlier generation, not this one


def _waiting(warmed: Verdict) -> Verdict:
    if warmed.status == "True":
        return Verdict("False", Reason.SERVING_PROGRESSING, "Warmup verified; serving starts")
    return Verdict("False", Reason.WARMUP_PENDING, "Serving waits for a verified warmup")


def _stalled(
    result: PlanningResult, warmup: WarmupState | None, serving: ServingState | None
) -> Verdict | None:
    """Why the object cannot progress until something changes, or None."""
    if result.planned.status != "True" and result.stalled:
        return result.planned
    if result.stalled:
        return result.coverage
    if result.refused is not None:
        return result.refused
    if warmup is not None and warmup.stalled:
        return warmup.verdict
    if serving is not None and serving.stalled:
        return serving.verdict
    return None


def _reconciling(warmed: Verdict, serving: ServingState | None) -> Verdict | None:
    """What the operator is still doing for this generation, or None when it is done."""
    if not warmed.holds:
        return warmed
    if serving is not None and not serving.realised:
        return Verdict("True", Reason.ROLLING_OUT, serving.verdict.message)
    return None


def _set(
    conditions: list[Condition] | None, type_: str, v: Verdict, gen: int | None, at: datetime | None
) -> list[Condition]:
    status = v.status if v.status in ("True", "False") else "Unknown"
    return set_condition(conditions, type_, status, v.reason, v.message, generation=gen, at=at)  # type: ignore[arg-type]


def _kstatus(
    conditions: list[Condition],
    stalled: Verdict | None,
    reconciling: Verdict | None,
    *,
    keep: bool,
    gen: int | None,
    at: datetime | None,
) -> list[Condition]:
    """kstatus: Stalled while the spec cannot progress, Reconciling while work goes on.

    ``keep``: a stage could not be read, so an existing Reconciling stays as it was when
    nothing else is in progress.
    """
    if reconciling is not None:
        work = Verdict("True", reconciling.reason, reconciling.message)
        conditions = _set(conditions, RECONCILING, work, gen, at)
    elif not keep:
        conditions = remove_condition(conditions, RECONCILING)
    if stalled is None:
        return remove_condition(conditions, STALLED)
    conditions = remove_condition(conditions, RECONCILING)
    return _set(conditions, STALLED, Verdict("True", stalled.reason, stalled.message), gen, at)


def status_patch(
    old: SpecDecodeDeploymentStatus | None, new: SpecDecodeDeploymentStatus
) -> dict[str, Any]:
    """The merge patch from ``old`` to ``new``: empty when nothing changed, so no API write.

    A merge patch (RFC 7386) deletes a key only when it is sent as null, at any depth: e.g. a
    finished warmup drops ``warmup.progress``, so the patch carries ``warmup: {progress: null,
    ...}``; without the null the server would keep the old progress, and every later sync would
    find a difference and send the same patch again.
    """
    dumped = new.model_dump(mode="json", by_alias=True, exclude_none=True)
    before = (old or SpecDecodeDeploymentStatus()).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    if dumped == before:
        return {}
    return _with_nulls(before, dumped, SpecDecodeDeploymentStatus)


def _with_nulls(
    before: dict[str, Any], after: dict[str, Any], model: type[BaseModel] | None
) -> dict[str, Any]:
    """``after`` with a null for each key of ``before`` it lacks, in objects present in both
    (lists are replaced whole by a merge patch, so nothing inside them needs a null).

    Only keys this operator knows (fields of ``model``; any key of a plain mapping) are
    nulled: a field a newer operator wrote is kept on the server, at every depth."""
    known = _known_keys(model, before)
    patch: dict[str, Any] = dict.fromkeys((before.keys() - after.keys()) & known)
    for key, value in after.items():
        was = before.get(key)
        if isinstance(value, dict) and isinstance(was, dict):
            patch[key] = _with_nulls(was, value, _field_model(model, key))
        else:
            patch[key] = value
    return patch


def _known_keys(model: type[BaseModel] | None, before: dict[str, Any]) -> set[str]:
    if model is None:  # a plain mapping: its keys are all this operator's
        return set(before)
    return {field.alias or name for name, field in model.model_fields.items()}


def _field_model(model: type[BaseModel] | None, key: str) -> type[BaseModel] | None:
    """The model of the field ``key`` (by its alias), None for a plain mapping or unknown."""
    if model is None:
        return None
    for name, field in model.model_fields.items():
        if key in (field.alias, name):
            for candidate in (field.annotation, *get_args(field.annotation)):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    return candidate
            return None
    return None
