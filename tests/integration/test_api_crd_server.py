"""The CRD on the real kube-apiserver: examples and defaults, status, conditions, scale, columns."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.api_controllers import get
from support.kubectl import submit
from support.paths import EXAMPLES

from warmgate.api import (
    Reason,
    derive_phase,
    load_manifest,
    parse_manifest,
    set_condition,
)
from warmgate.api.constants import BUCKETS_PLANNED, READY, WARMED
from warmgate.api.status import PlanSummary, ServingSummary, SpecDecodeDeploymentStatus
from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def crd(warmgate_crd: ControlPlane) -> ControlPlane:
    """The committed CRD, installed (idempotently) and established."""
    return warmgate_crd


def _manifest(path: Path, name: str | None = None) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["metadata"].pop("namespace", None)
    if name:
        data["metadata"]["name"] = name
    return data


def _create(cp: ControlPlane, namespace: str, manifest: dict[str, Any]) -> dict[str, Any]:
    out = submit(cp, namespace, manifest, "create")
    created: dict[str, Any] = json.loads(out.stdout)
    return created


def _get(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return get(cp, "sdd", name, "-n", namespace)


def _patch_status(cp: ControlPlane, namespace: str, name: str, status: dict[str, Any]) -> None:
    cp.kubectl(
        "patch",
        "sdd",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_is_accepted_and_server_defaults_equal_model_defaults(
    crd: ControlPlane, namespace: str, path: Path
) -> None:
    out = submit(crd, namespace, _manifest(path), "create", "--dry-run=server")
    server_spec = json.loads(out.stdout)["spec"]
    assert server_spec == load_manifest(path).to_dict()["spec"]


def test_kubectl_explain_shows_the_descriptions(crd: ControlPlane) -> None:
    out = crd.kubectl("explain", "sdd.spec.speculative.numSpeculativeTokens").stdout
    assert "decode buckets are expanded by 1+k" in out
    out = crd.kubectl("explain", "specdecodedeployments.spec.buckets.coverage").stdout
    assert "maxExtraBuckets" in out


def test_short_name_and_category(crd: ControlPlane, namespace: str) -> None:
    _create(crd, namespace, _manifest(EXAMPLES[0], "listed"))
    assert "listed" in crd.kubectl("get", "warmgate", "-n", namespace).stdout
    assert "listed" in crd.kubectl("get", "sdd", "-n", namespace).stdout


def _ready_status(generation: int) -> dict[str, Any]:
    conditions = set_condition([], BUCKETS_PLANNED, "True", Reason.PLANNED, generation=generation)
    conditions = set_condition(conditions, WARMED, "True", Reason.WARMUP_SUCCEEDED, "145/145")
    conditions = set_condition(
        conditions,
        READY,
        "True",
        Reason.REPLICAS_READY,
        "2/2 replicas serve plan abc",
        generation=generation,
    )
    status = SpecDecodeDeploymentStatus(
        observed_generation=generation,
        phase=derive_phase(conditions),
        conditions=conditions,
        plan=PlanSummary(hash="abc", total_buckets=145, uncovered_count=0),
        serving=ServingSummary(replicas=2, ready_replicas=2, selector="warmgate.dev/name=ready"),
    )
    return status.to_dict()


def test_status_subresource_conditions_and_kubectl_wait(crd: ControlPlane, namespace: str) -> None:
    created = _create(crd, namespace, _manifest(EXAMPLES[0], "ready"))
    generation = created["metadata"]["generation"]
    _patch_status(crd, namespace, "ready", _ready_status(generation))
    crd.kubectl("wait", "--for=condition=Ready", "sdd/ready", "-n", namespace, "--timeout=20s")
    back = _get(crd, namespace, "ready")
    assert back["metadata"]["generation"] == generation  # status writes never bump it
    sdd = parse_manifest(back)  # the server's status round-trips through the models
    assert sdd.status is not None
    assert sdd.status.observed_generation == generation
    assert sdd.to_dict()["status"] == back["status"]


def test_printer_columns(crd: ControlPlane, namespace: str) -> None:
    created = _create(crd, namespace, _manifest(EXAMPLES[0], "columns"))
    _patch_status(crd, namespace, "columns", _ready_status(created["metadata"]["generation"]))
    lines = crd.kubectl("get", "sdd", "columns", "-n", namespace).stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "READY", "BUCKETS", "WARMED", "AGE"]
    assert lines[1].split()[:4] == ["columns", "Ready", "True", "145"]
    wide = crd.kubectl("get", "sdd", "columns", "-n", namespace, "-o", "wide").stdout
    assert "MESSAGE" in wide
    assert "2/2 replicas serve plan abc" in wide


def test_spec_change_bumps_generation_for_observed_generation(
    crd: ControlPlane, namespace: str
) -> None:
    created = _create(crd, namespace, _manifest(EXAMPLES[0], "gen"))
    patch = json.dumps({"spec": {"speculative": {"numSpeculativeTokens": 3}}})
    crd.kubectl("patch", "sdd", "gen", "-n", namespace, "--type=merge", "-p", patch)
    assert (
        _get(crd, namespace, "gen")["metadata"]["generation"]
        == created["metadata"]["generation"] + 1
    )


def test_scale_subresource_drives_serving_replicas(crd: ControlPlane, namespace: str) -> None:
    created = _create(crd, namespace, _manifest(EXAMPLES[0], "scaled"))
    _patch_status(crd, namespace, "scaled", _ready_status(created["metadata"]["generation"]))
    crd.kubectl("scale", "sdd/scaled", "-n", namespace, "--replicas=5")
    assert _get(crd, namespace, "scaled")["spec"]["serving"]["replicas"] == 5
    raw = crd.kubectl(
        "get",
        "--raw",
        f"/apis/warmgate.dev/v1alpha1/namespaces/{namespace}/specdecodedeployments/scaled/scale",
    ).stdout
    scale = json.loads(raw)
    assert scale["spec"]["replicas"] == 5
    assert scale["status"] == {"replicas": 2, "selector": "warmgate.dev/name=ready"}


def test_malformed_conditions_are_refused(crd: ControlPlane, namespace: str) -> None:
    _create(crd, namespace, _manifest(EXAMPLES[0], "badstatus"))
    bad = {"conditions": [{"type": "Ready", "status": "Maybe", "reason": "x y"}]}
    result = crd.kubectl(
        "patch",
        "sdd",
        "badstatus",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": bad}),
        check=False,
    )
    assert result.returncode != 0
    assert 'status.conditions[0].status: Unsupported value: "Maybe"' in result.stderr
    assert "status.conditions[0].lastTransitionTime: Required value" in result.stderr
