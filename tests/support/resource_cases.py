"""Builder test cases: every example with a uid, a namespace and its plan to warm."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from support.paths import EXAMPLES
from warmgate.api import SpecDecodeDeployment, load_manifest
from warmgate.buckets import BucketPlan
from warmgate.reconcile.planning.evaluate import evaluate, known_unwarmable
from warmgate.resources import Children, PlanBundle, desired_children
from warmgate.settings import Settings

__all__ = ["EXAMPLES", "OPERATOR_IMAGE", "SETTINGS", "UID", "Case", "make_case", "planned"]

OPERATOR_IMAGE = "registry.example.com/warmgate/operator:0.1.0"
SETTINGS = Settings(operator_image=OPERATOR_IMAGE)
UID = "6f1c2d3e-0000-4000-8000-000000000001"


@dataclass(frozen=True)
class Case:
    """One example manifest, ready for the builders."""

    name: str
    sdd: SpecDecodeDeployment
    to_run: PlanBundle

    @property
    def plan(self) -> BucketPlan:
        """The bucket plan to warm."""
        return self.to_run.buckets

    def children(self, kv_blocks: int | None = None) -> Children:
        """Every child of the plan (serving pins ``kv_blocks`` when the plan has no count)."""
        return desired_children(self.sdd, replace(self.to_run, kv_blocks=kv_blocks), SETTINGS)


def planned(sdd: SpecDecodeDeployment) -> PlanBundle:
    """What the operator builds the children from: evaluate(sdd)'s plan, estimate and drafter
    sweep."""
    result = evaluate(sdd)
    assert result.plan is not None, f"{sdd.metadata.name}: the planner found no plan"
    assert result.summary is not None
    to_run = result.to_run(kv_blocks=None)
    if to_run is None:  # a plan the spec may not warm: the builders are still asked about it
        sweep = result.evaluation.drafter.sweep_spec if result.evaluation else None
        estimate = float(result.summary.estimated_warmup_seconds or 0)
        known = known_unwarmable(result.evaluation) if result.evaluation else ()
        to_run = PlanBundle(result.plan, estimate, drafter_sweep=sweep, known_unwarmable=known)
    return to_run


def make_case(path: Path, namespace: str = "llm", uid: str = UID) -> Case:
    """The example with server-side identity (uid, namespace) and evaluate(sdd)'s plan."""
    sdd = load_manifest(path)
    meta = sdd.metadata.model_copy(update={"uid": uid, "namespace": namespace, "generation": 1})
    sdd = sdd.model_copy(update={"metadata": meta})
    return Case(path.stem, sdd, planned(sdd))
