"""The cluster adapter against the real API server: 404 and 409 are answers, the rest errors."""

from __future__ import annotations

from typing import Any

import pytest

from warmgate.controlplane import ControlPlane
from warmgate.handlers.kube_cluster import KubeCluster
from warmgate.reconcile.cluster import ClusterError

pytestmark = pytest.mark.integration


def deployment(namespace: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": "adapter-test"}
    container = {"name": "main", "image": "registry.example.com/none:1"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "adapter", "namespace": namespace},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}},
        },
    }


@pytest.fixture
def cluster(control_plane: ControlPlane) -> KubeCluster:
    return KubeCluster(control_plane.api_client())


def test_a_missing_object_reads_as_none(cluster: KubeCluster, namespace: str) -> None:
    assert cluster.read("Job", namespace, "absent") is None
    assert cluster.read("Deployment", namespace, "absent") is None
    assert cluster.list_pods(namespace, "app=absent") == []


def test_a_taken_name_and_a_stale_replace_are_false(cluster: KubeCluster, namespace: str) -> None:
    assert cluster.create(deployment(namespace)) is True
    assert cluster.create(deployment(namespace)) is False  # 409 AlreadyExists
    stored = cluster.read("Deployment", namespace, "adapter")
    assert stored is not None
    version = stored["metadata"]["resourceVersion"]
    newer = deployment(namespace, replicas=2)
    newer["metadata"]["resourceVersion"] = version
    assert cluster.replace(newer) is True
    stale = deployment(namespace, replicas=3)
    stale["metadata"]["resourceVersion"] = version  # the write above moved it on
    assert cluster.replace(stale) is False  # 409 Conflict
    cluster.scale(namespace, "adapter", 0)
    final = cluster.read("Deployment", namespace, "adapter")
    assert final is not None
    assert final["spec"]["replicas"] == 0


def test_any_other_refusal_is_a_cluster_error(cluster: KubeCluster, namespace: str) -> None:
    with pytest.raises(ClusterError) as refused:
        cluster.create(deployment("no-such-namespace"))  # 404 on a create is not "absent"
    assert refused.value.status == 404
    invalid = deployment(namespace)
    invalid["spec"]["selector"] = {"matchLabels": {"app": "other"}}  # does not match the template
    with pytest.raises(ClusterError) as unprocessable:
        cluster.create(invalid)
    assert unprocessable.value.status == 422
    with pytest.raises(ClusterError):
        cluster.set_pod_condition(namespace, "absent", {"type": "x", "status": "True"})
