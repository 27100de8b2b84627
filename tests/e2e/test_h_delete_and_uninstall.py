"""Scenario h: deleting an SDD lets the real garbage collector remove its children; `helm
uninstall` keeps the CRD and the SpecDecodeDeployments; a new `helm install` adopts the CRD."""

from __future__ import annotations

from typing import Any

import pytest
from e2e_support import E2ECluster, sdd, wait_for

from warmgate.devcluster import operator

# It uninstalls the operator (tests/support/node_share.py).
pytestmark = pytest.mark.node_alone

NAME, KEPT = "deleted", "kept"
KINDS = "jobs,configmaps,deployments,services,pods,pvc"


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str) -> dict[str, Any]:
    e2e.apply(sdd(NAME, namespace, e2e.images.engine.ref, cache_claim=True))
    e2e.wait_ready(namespace, NAME, check=True)
    children = e2e.items(KINDS, namespace, NAME)
    e2e.kubectl("delete", "sdd", NAME, "-n", namespace, "--wait=true", "--timeout=120s")
    wait_for("the garbage collector", lambda: not e2e.items(KINDS, namespace, NAME), 180)
    e2e.apply(sdd(KEPT, namespace, e2e.images.engine.ref, node_selector={"none": "none"}))
    cluster = e2e.cluster
    operator.uninstall(cluster.assets, cluster.kubeconfig)
    after = {
        "crd": e2e.get_or_none("crd", "specdecodedeployments.warmgate.dev"),
        "kept": e2e.get_or_none("sdd", "-n", namespace, KEPT),
        "operator": e2e.get("deployments", "-n", operator.NAMESPACE)["items"],
    }
    operator.install(cluster.assets, cluster.kubeconfig, e2e.images.operator.ref)
    return {"children": children, "after": after}


def test_the_sdd_had_children_and_the_garbage_collector_removed_them(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    kinds = {c["kind"] for c in run["children"]}
    assert {"Job", "ConfigMap", "Deployment", "Service", "Pod", "PersistentVolumeClaim"} <= kinds
    assert e2e.items(KINDS, namespace, NAME) == []


def test_helm_uninstall_keeps_the_crd_and_the_objects(run: dict[str, Any]) -> None:
    assert run["after"]["crd"] is not None
    assert run["after"]["crd"]["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert run["after"]["kept"] is not None
    assert run["after"]["operator"] == []


def test_a_new_install_adopts_the_kept_crd_and_runs(e2e: E2ECluster, run: dict[str, Any]) -> None:
    deployment = e2e.get("deployment", "-n", operator.NAMESPACE, operator.RELEASE)
    assert deployment["status"].get("readyReplicas") == 1
