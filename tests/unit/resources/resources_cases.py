"""Builder test cases: every example with a uid, a namespace and its plan to warm."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from warmgate.api import SpecDecodeDeployment, load_manifest
from warmgate.buckets import BucketPlan
from warmgate.reconcile.planning import evaluate

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.yaml"))
OPERATOR_IMAGE = "registry.example.com/warmgate/operator:0.1.0"
UID = "6f1c2d3e-0000-4000-8000-000000000001"


@dataclass(frozen=True)
class Case:
    """One example manifest, ready for the builders."""

    name: str
    sdd: SpecDecodeDeployment
    plan: BucketPlan


def make_case(path: Path, namespace: str = "llm", uid: str = UID) -> Case:
    """The example with server-side identity (uid, namespace) and evaluate(sdd).plan."""
    sdd = load_manifest(path)
    meta = sdd.metadata.model_copy(update={"uid": uid, "namespace": namespace, "generation": 1})
    sdd = sdd.model_copy(update={"metadata": meta})
    plan = evaluate(sdd).plan
    assert plan is not None, f"{path.name}: the planner found no plan"
    return Case(path.stem, sdd, plan)
