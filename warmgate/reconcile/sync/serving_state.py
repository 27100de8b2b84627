"""The serving stage, pure: the serving Deployment -> the Ready verdict and status.serving.

The operator points the Deployment at a plan only after that plan's warmup was verified, so
whatever plan the Deployment runs is a verified one. While a new plan warms, and while it rolls
out, the Pods of the last verified plan keep serving: Ready stays True for them, but it is not
the current generation's Ready (its observedGeneration stays at the generation it describes,
so `kubectl wait --for=condition=Ready` keeps waiting), and status.serving.planHash names a
plan only once every replica runs it.

A rollout is complete as the Deployment controller counts it (kubectl rollout status):
status.observedGeneration caught up with metadata.generation, and updatedReplicas, replicas
and availableReplicas all equal the replicas the SpecDecodeDeployment asks for. A
Progressing=False condition (reason ProgressDeadlineExceeded) stalls the rollout.
"""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest
from warmgate.api.constants import ANNOTATION_PLAN_HASH, Reason
from warmgate.api.status import ServingSummary
from warmgate.reconcile.planning.verdict import Verdict


@dataclass(frozen=True)
class ServingState:
    """What the serving stage decided.

    ``realised``: every wanted replica runs the current plan and is available (the current
    generation is done). ``stalled``: the rollout exceeded its progress deadline.
    """

    verdict: Verdict
    summary: ServingSummary
    realised: bool = False
    stalled: bool = False


@dataclass(frozen=True)
class Rollout:
    """The Deployment controller's counts for the Deployment's current spec."""

    wanted: int
    replicas: int
    updated: int
    ready: int
    available: int
    observed: bool
    stuck: str | None  # the Progressing=False message, when the deadline passed

    @classmethod
    def of(cls, deployment: Manifest) -> Rollout:
        status = deployment.get("status") or {}
        seen = int(status.get("observedGeneration") or 0)
        conditions: list[Manifest] = status.get("conditions") or []
        progressing = next((c for c in conditions if c.get("type") == "Progressing"), {})
        stuck = progressing.get("reason") == "ProgressDeadlineExceeded"
        return cls(
            wanted=int((deployment.get("spec") or {}).get("replicas") or 0),
            replicas=int(status.get("replicas") or 0),
            updated=int(status.get("updatedReplicas") or 0),
            ready=int(status.get("readyReplicas") or 0),
            available=int(status.get("availableReplicas") or 0),
            observed=seen >= int(deployment["metadata"].get("generation") or 0),
            stuck=str(progressing.get("message") or "no progress") if stuck else None,
        )

    def complete(self, replicas: int) -> bool:
        """The Deployment's current template runs on ``replicas`` available replicas, only."""
        counts = (self.wanted, self.updated, self.replicas)
        return self.observed and counts == (replicas,) * 3 and self.available >= replicas


def served_plan(deployment: Manifest | None) -> str | None:
    """The plan digest the Deployment's template runs (its `warmgate.dev/plan-hash`)."""
    if deployment is None:
        return None
    return (deployment["metadata"].get("annotations") or {}).get(ANNOTATION_PLAN_HASH)


@dataclass(frozen=True)
class Serving:
    """What serving is asked for: the current plan, the replicas, the names it reports."""

    plan_digest: str
    replicas: int
    names: tuple[str, str]
    selector: str
    # status.serving.planHash so far: the last plan every replica ran.
    served_before: str | None = None
    # Ready was True before: Pods of a verified plan were serving traffic.
    was_ready: bool = False


def evaluate_serving(deployment: Manifest | None, asked: Serving) -> ServingState:
    """Ready from the Deployment's rollout, for the plan it serves."""
    if deployment is None:
        verdict = Verdict("False", Reason.WARMUP_PENDING, "Serving waits for a verified warmup")
        return ServingState(verdict, ServingSummary(selector=asked.selector))
    rollout = Rollout.of(deployment)
    complete = rollout.complete(asked.replicas)
    served = served_plan(deployment)
    summary = ServingSummary(
        plan_hash=served if complete else asked.served_before,
        deployment_name=asked.names[0],
        service_name=asked.names[1],
        replicas=rollout.replicas,
        ready_replicas=rollout.ready,
        selector=asked.selector,
    )
    realised = complete and served == asked.plan_digest
    verdict = _verdict(rollout, complete, served, asked)
    return ServingState(verdict, summary, realised, stalled=rollout.stuck is not None)


def _verdict(rollout: Rollout, complete: bool, served: str | None, asked: Serving) -> Verdict:
    short, n, available = (served or "unknown")[:19], asked.replicas, rollout.available
    if n == 0:
        return Verdict("True", Reason.SCALED_TO_ZERO, "Scaled to zero replicas")
    if served != asked.plan_digest:  # the current plan is not verified (or not applied) yet
        message = (
            f"{available}/{n} replicas serve the last verified plan {short}; plan "
            f"{asked.plan_digest[:19]} is not verified yet"
        )
        if available > 0:
            return Verdict("True", Reason.REPLICAS_READY, message)
        return Verdict("False", Reason.SERVING_PROGRESSING, message)
    if complete:
        return Verdict("True", Reason.REPLICAS_READY, f"{n}/{n} replicas ready on plan {short}")
    progress = f"{rollout.updated}/{n} updated to plan {short}, {available}/{n} available"
    if rollout.stuck is not None:
        message = f"The rollout stopped: {rollout.stuck} ({progress})"
        status = "True" if asked.was_ready and available > 0 else "False"
        return Verdict(status, Reason.PROGRESS_DEADLINE_EXCEEDED, message)
    if asked.was_ready and available > 0:
        # Pods of the last verified plan (or of this one) keep serving while the rest roll.
        return Verdict("True", Reason.ROLLING_OUT, f"Rolling out: {progress}")
    return Verdict("False", Reason.SERVING_PROGRESSING, f"Rolling out: {progress}")
