"""The serving stage, pure: the serving Deployment -> the Ready verdict and status.serving.

The operator points the Deployment at a plan only after that plan's warmup was verified, so
whatever plan the Deployment runs is a verified one. While a new plan warms, the Deployment
keeps the last verified plan and Ready reports it: traffic never waits on a warmup.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest
from warmgate.api.constants import ANNOTATION_PLAN_HASH, Reason
from warmgate.api.status import ServingSummary
from warmgate.reconcile.verdict import Verdict


@dataclass(frozen=True)
class ServingState:
    """What the serving stage decided."""

    verdict: Verdict
    summary: ServingSummary


def served_plan(deployment: Manifest | None) -> str | None:
    """The plan digest the Deployment runs (its `warmgate.dev/plan-hash` annotation)."""
    if deployment is None:
        return None
    return (deployment["metadata"].get("annotations") or {}).get(ANNOTATION_PLAN_HASH)


def evaluate_serving(
    deployment: Manifest | None, plan_digest: str, *, names: tuple[str, str], selector: str
) -> ServingState:
    """Ready from the Deployment's rollout, for the plan it serves."""
    if deployment is None:
        verdict = Verdict("False", Reason.WARMUP_PENDING, "Serving waits for a verified warmup")
        return ServingState(verdict, ServingSummary(selector=selector))
    status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas") or 0)
    ready = int(status.get("readyReplicas") or 0)
    served = served_plan(deployment)
    summary = ServingSummary(
        plan_hash=served,
        deployment_name=names[0],
        service_name=names[1],
        replicas=int(status.get("replicas") or 0),
        ready_replicas=ready,
        selector=selector,
    )
    return ServingState(_verdict(deployment, wanted, ready, served, plan_digest), summary)


def _rolled_out(deployment: Manifest) -> bool:
    """The Deployment controller has seen the current spec (status.observedGeneration)."""
    seen = int((deployment.get("status") or {}).get("observedGeneration") or 0)
    return seen >= int(deployment["metadata"].get("generation") or 0)


def _verdict(
    deployment: Manifest, wanted: int, ready: int, served: str | None, plan_digest: str
) -> Verdict:
    if wanted == 0:
        return Verdict("True", Reason.SCALED_TO_ZERO, "Scaled to zero replicas")
    short = (served or "unknown")[:12]
    if served != plan_digest and ready > 0:
        message = (
            f"{ready}/{wanted} replicas serve the last verified plan {short}; a new plan warms"
        )
        return Verdict("True", Reason.REPLICAS_READY, message)
    if ready >= wanted and _rolled_out(deployment):
        return Verdict(
            "True", Reason.REPLICAS_READY, f"{ready}/{wanted} replicas ready on plan {short}"
        )
    return Verdict(
        "False", Reason.SERVING_PROGRESSING, f"{ready}/{wanted} replicas ready on plan {short}"
    )
