"""Every child built for every example is accepted by the real kube-apiserver (dry-run=server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.kubectl import submit
from support.paths import EXAMPLES

from warmgate.api import SpecDecodeDeployment, parse_manifest
from warmgate.api.constants import READINESS_GATE
from warmgate.devcluster.controlplane import ControlPlane
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.resources import PlanBundle, desired_children, serving_selector
from warmgate.settings import Settings

pytestmark = pytest.mark.integration
OPERATOR_IMAGE = "registry.example.com/warmgate/operator:0.1.0"


@pytest.fixture(scope="module")
def crd(warmgate_crd: ControlPlane) -> ControlPlane:
    """The committed CRD, installed (idempotently, server-side) and established."""
    return warmgate_crd


def _create_parent(cp: ControlPlane, namespace: str, path: Path) -> SpecDecodeDeployment:
    """Create the example for real: the owner references need the server's uid."""
    doc: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    doc["metadata"].pop("namespace", None)
    out = submit(cp, namespace, doc, "create")
    created: dict[str, Any] = json.loads(out.stdout)
    assert created["metadata"]["uid"]
    return parse_manifest(created)


def _children(sdd: SpecDecodeDeployment) -> list[dict[str, Any]]:
    result = evaluate(sdd)
    assert result.plan is not None
    assert result.summary is not None
    estimate = float(result.summary.estimated_warmup_seconds or 0)
    to_run = PlanBundle(result.plan, estimate, kv_blocks=4096)
    children = desired_children(sdd, to_run, Settings(operator_image=OPERATOR_IMAGE))
    return [*children.warmup, children.serving_deployment, children.service]


def _dry_run(cp: ControlPlane, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    out = submit(cp, namespace, manifest, "apply", "--dry-run=server", check=False)
    kind, name = manifest["kind"], manifest["metadata"]["name"]
    assert out.returncode == 0, f"{kind}/{name} refused: {out.stderr}"
    accepted: dict[str, Any] = json.loads(out.stdout)
    return accepted


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_child_is_accepted_by_the_apiserver(
    crd: ControlPlane, namespace: str, path: Path
) -> None:
    sdd = _create_parent(crd, namespace, path)
    children = _children(sdd)
    assert {c["kind"] for c in children} >= {"ConfigMap", "Job", "Deployment", "Service"}
    for manifest in children:
        accepted = _dry_run(crd, namespace, manifest)
        assert accepted["metadata"]["name"] == manifest["metadata"]["name"]
        assert accepted["metadata"]["ownerReferences"][0]["uid"] == sdd.metadata.uid
        assert accepted["metadata"]["labels"] == manifest["metadata"]["labels"]


def test_the_server_keeps_the_gate_the_probes_and_the_failure_policy(
    crd: ControlPlane, namespace: str
) -> None:
    """Nothing the design relies on is pruned or defaulted away by the server."""
    sdd = _create_parent(crd, namespace, EXAMPLES[0])
    by_kind = {c["kind"]: c for c in _children(sdd)}
    deployment = _dry_run(crd, namespace, by_kind["Deployment"])
    pod = deployment["spec"]["template"]["spec"]
    assert pod["readinessGates"] == [{"conditionType": READINESS_GATE}]
    sent = by_kind["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    kept = pod["containers"][0]
    assert kept["startupProbe"]["failureThreshold"] == sent["startupProbe"]["failureThreshold"]
    assert kept["command"] == sent["command"]
    job = _dry_run(crd, namespace, by_kind["Job"])
    assert job["spec"]["podFailurePolicy"] == by_kind["Job"]["spec"]["podFailurePolicy"]
    main = job["spec"]["template"]["spec"]["containers"][0]
    assert main["terminationMessagePolicy"] == "File"
    # The status selector string parses as a label selector on the server.
    crd.kubectl("get", "pods", "-n", namespace, "-l", serving_selector(sdd))


def test_the_children_can_be_created_and_applied_again(crd: ControlPlane, namespace: str) -> None:
    """Created for real, then re-applied unchanged: the builders are apply-idempotent."""
    eagle3 = next(p for p in EXAMPLES if p.stem == "llama31-8b-eagle3-gaudi2")  # has a claim
    sdd = _create_parent(crd, namespace, eagle3)
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": _children(sdd)})
    # as the operator writes: server-side, its field manager
    as_operator = ("--server-side", "--field-manager=warmgate", "-n", namespace, "-f", "-")
    crd.kubectl("apply", *as_operator, stdin=text)
    again = crd.kubectl("apply", *as_operator, "-o", "json", stdin=text)
    items = json.loads(again.stdout)["items"]
    assert [i["kind"] for i in items] == [c["kind"] for c in _children(sdd)]
    assert "PersistentVolumeClaim" in {i["kind"] for i in items}
    diff = crd.kubectl("diff", *as_operator, stdin=text, check=False)
    assert diff.returncode == 0, diff.stdout + diff.stderr
