"""The warmup and serving Pods against Pod Security admission of the real API server (issue 11
item 10, issue 23 item 14): every example's Pods, as built by default, are admitted in a
namespace enforcing "restricted" (and so "baseline"); with spec.podSecurity baseline, the image's
own user, they are admitted by "baseline" and refused by "restricted", which shows the
namespaces really enforce. The e2e tier runs a whole SpecDecodeDeployment in such namespaces on
the local node (tests/e2e/test_j_pod_security.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from support.resource_cases import EXAMPLES, make_case

from warmgate.devcluster.controlplane import ControlPlane
from warmgate.resources import Children

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def enforcing(control_plane: ControlPlane) -> Iterator[dict[str, str]]:
    """Two namespaces, enforcing the baseline and the restricted profile (latest version)."""
    names = {}
    for level in ("baseline", "restricted"):
        name = f"pod-security-{level}"
        control_plane.kubectl("create", "namespace", name)
        control_plane.kubectl(
            "label", "namespace", name, f"pod-security.kubernetes.io/enforce={level}"
        )
        names[level] = name
    yield names
    for name in names.values():
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _pods(children: Children, namespace: str) -> list[dict[str, Any]]:
    """The Pods the Job and ReplicaSet controllers would create from the two templates."""
    pods = []
    for owner in (children.warmup_job, children.serving_deployment):
        template = owner["spec"]["template"]
        meta = {"name": f"{owner['metadata']['name'][:50]}-pod", "namespace": namespace}
        meta["labels"] = template["metadata"]["labels"]
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": template["spec"]})
    return pods


def _admit(cp: ControlPlane, pod: dict[str, Any]) -> Any:
    return cp.kubectl("create", "--dry-run=server", "-f", "-", stdin=json.dumps(pod), check=False)


def _case(stem: str, namespace: str, **spec: Any) -> Children:
    case = make_case(next(p for p in EXAMPLES if p.stem == stem), namespace=namespace)
    if spec:
        updated = case.sdd.spec.model_copy(update=spec)
        sdd = case.sdd.model_copy(update={"spec": updated})
        case = case.__class__(case.name, sdd, case.to_run)
    return case.children(kv_blocks=4096)


@pytest.mark.parametrize("stem", [p.stem for p in EXAMPLES])
def test_every_example_is_admitted_by_restricted_by_default(
    control_plane: ControlPlane, enforcing: dict[str, str], stem: str
) -> None:
    for level in ("restricted", "baseline"):
        for pod in _pods(_case(stem, enforcing[level]), enforcing[level]):
            done = _admit(control_plane, pod)
            assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("stem", [p.stem for p in EXAMPLES])
def test_the_baseline_opt_out_is_admitted_by_baseline(
    control_plane: ControlPlane, enforcing: dict[str, str], stem: str
) -> None:
    case = _case(stem, enforcing["baseline"], pod_security="baseline")
    for pod in _pods(case, enforcing["baseline"]):
        done = _admit(control_plane, pod)
        assert done.returncode == 0, done.stderr


def test_restricted_refuses_the_baseline_opt_out(
    control_plane: ControlPlane, enforcing: dict[str, str]
) -> None:
    for pod in _pods(
        _case("minimal-ngram", enforcing["restricted"], pod_security="baseline"),
        enforcing["restricted"],
    ):
        done = _admit(control_plane, pod)
        assert done.returncode != 0
        assert 'violates PodSecurity "restricted:latest"' in done.stderr
        assert "runAsNonRoot != true" in done.stderr
