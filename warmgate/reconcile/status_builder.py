"""The whole status of a SpecDecodeDeployment from the stages' verdicts (conditions, kstatus)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from warmgate.api import (
    SpecDecodeDeployment,
    SpecDecodeDeploymentStatus,
    derive_phase,
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
from warmgate.reconcile.drift import DriftState, with_drift
from warmgate.reconcile.planning import PlanningResult
from warmgate.reconcile.serving_state import ServingState
from warmgate.reconcile.verdict import Verdict
from warmgate.reconcile.warmup_state import WarmupState


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
    (Ready says so when the serving engines ran unwarmed shapes: ``drift``)."""
    old = sdd.status or SpecDecodeDeploymentStatus()
    gen = sdd.metadata.generation
    conditions: list[Condition] | None = old.conditions
    for type_, verdict in ((BUCKETS_PLANNED, result.planned), (COVERAGE_PROVEN, result.coverage)):
        conditions = _set(conditions, type_, verdict, gen, at)
    warmed = (
        warmup.verdict
        if warmup
        else Verdict("Unknown", Reason.WARMUP_PENDING, "The warmup stage has not run")
    )
    conditions = _set(conditions, WARMED, warmed, gen, at)
    ready = with_drift(serving.verdict if serving else _ready(warmed), drift)
    conditions = _set(conditions, READY, ready, gen, at)
    stalled = result.stalled or (warmup is not None and warmup.stalled)
    conditions = _kstatus(conditions, _cause(result, warmup) if stalled else None, warmed, gen, at)
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


def _ready(warmed: Verdict) -> Verdict:
    if warmed.status == "True":
        # The serving stage (Deployment gated on the warmed readiness gate) is the next step.
        return Verdict(
            "False", Reason.SERVING_PROGRESSING, "Warmup verified; serving is not managed yet"
        )
    return Verdict("False", Reason.WARMUP_PENDING, "Serving waits for a verified warmup")


def _cause(result: PlanningResult, warmup: WarmupState | None) -> Verdict:
    if result.planned.status != "True":
        return result.planned
    if result.stalled or warmup is None:
        return result.coverage
    return warmup.verdict


def _set(
    conditions: list[Condition] | None, type_: str, v: Verdict, gen: int | None, at: datetime | None
) -> list[Condition]:
    status = v.status if v.status in ("True", "False") else "Unknown"
    return set_condition(conditions, type_, status, v.reason, v.message, generation=gen, at=at)  # type: ignore[arg-type]


def _kstatus(
    conditions: list[Condition],
    stalled: Verdict | None,
    warmed: Verdict,
    gen: int | None,
    at: datetime | None,
) -> list[Condition]:
    """kstatus: Stalled while the spec cannot progress, Reconciling while a warmup runs."""
    if warmed.reason == Reason.WARMUP_RUNNING:
        conditions = _set(
            conditions, RECONCILING, Verdict("True", warmed.reason, warmed.message), gen, at
        )
    else:
        conditions = remove_condition(conditions, RECONCILING)
    if stalled is None:
        return remove_condition(conditions, STALLED)
    return _set(conditions, STALLED, Verdict("True", stalled.reason, stalled.message), gen, at)


def status_patch(
    old: SpecDecodeDeploymentStatus | None, new: SpecDecodeDeploymentStatus
) -> dict[str, Any]:
    """The merge patch from ``old`` to ``new``: empty when nothing changed, so no API write.

    A merge patch deletes a key only when it is sent as null, so keys that disappear are null.
    """
    dumped = new.model_dump(mode="json", by_alias=True, exclude_none=True)
    before = (old or SpecDecodeDeploymentStatus()).model_dump(
        mode="json", by_alias=True, exclude_none=True
    )
    if dumped == before:
        return {}
    return {**dumped, **dict.fromkeys(before.keys() - dumped.keys())}
