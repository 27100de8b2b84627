"""The cluster adapter against the real API server: 404 and 409 are answers, the rest errors."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from kubernetes import client, config
from support.polling import eventually

from warmgate.devcluster.controlplane import ControlPlane
from warmgate.kube.cluster import ClusterError
from warmgate.kube.kube_cluster import KubeCluster

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


def test_a_taken_name_and_a_stale_replace_are_refused(cluster: KubeCluster, namespace: str) -> None:
    assert cluster.create(deployment(namespace)) is not None
    assert cluster.create(deployment(namespace)) is None  # 409 AlreadyExists
    stored = cluster.read("Deployment", namespace, "adapter")
    assert stored is not None
    version = stored["metadata"]["resourceVersion"]
    newer = deployment(namespace, replicas=2)
    newer["metadata"]["resourceVersion"] = version
    replaced = cluster.replace(newer)
    assert replaced is not None
    assert replaced["spec"]["replicas"] == 2  # the object as the server stored it
    assert replaced["metadata"]["resourceVersion"] != version
    stale = deployment(namespace, replicas=3)
    stale["metadata"]["resourceVersion"] = version  # the write above moved it on
    assert cluster.replace(stale) is None  # 409 Conflict
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


def config_map(namespace: str, name: str, labels: dict[str, str]) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "labels": labels}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"a": "1"}}


def test_lists_patches_and_deletes_exactly_the_object_read(
    cluster: KubeCluster, namespace: str
) -> None:
    """The operations garbage collection and drift repair use (issue 11 items 4, 8, 12)."""
    assert cluster.create(config_map(namespace, "one", {"app": "gc"}))
    assert cluster.create(config_map(namespace, "two", {"app": "other"}))
    # ConfigMaps are listed from the watch cache at any version: it may lag a write briefly.
    assert eventually(lambda: len(cluster.list_objects("ConfigMap", namespace, "app=gc")) == 1, 5)
    (one,) = cluster.list_objects("ConfigMap", namespace, "app=gc")
    assert one["metadata"]["name"] == "one"
    uid = one["metadata"]["uid"]
    assert cluster.delete("ConfigMap", namespace, "one", "not-" + uid) is False  # 409: precondition
    assert cluster.delete("ConfigMap", namespace, "one", uid) is True
    assert cluster.delete("ConfigMap", namespace, "one", uid) is False  # 404: already gone
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "svc", "namespace": namespace},
        "spec": {"type": "NodePort", "selector": {"a": "b", "c": "d"}, "ports": [{"port": 80}]},
    }
    assert cluster.create(service)
    body = {"spec": {"type": "ClusterIP", "ports": [{"port": 8000}], "selector": {"c": None}}}
    assert cluster.patch("Service", namespace, "svc", body)  # a merge patch: lists replaced
    patched = cluster.read("Service", namespace, "svc")
    assert patched is not None
    assert patched["spec"]["type"] == "ClusterIP"
    assert [p["port"] for p in patched["spec"]["ports"]] == [8000]
    assert "nodePort" not in patched["spec"]["ports"][0]
    assert patched["spec"]["selector"] == {"a": "b"}
    assert cluster.patch("Service", namespace, "absent", body) is None
    assert cluster.read("PersistentVolumeClaim", namespace, "absent") is None
    assert cluster.events(namespace, uid) == []


def test_the_status_of_a_spec_decode_deployment_is_patched(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str
) -> None:
    """The write before planning goes to the status subresource (issue 11 item 5)."""
    from support.api_controllers import get, seeds_example

    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(namespace, "s")))
    cluster = KubeCluster(control_plane.api_client())
    cluster.patch_status(namespace, "s", {"observedGeneration": 1, "phase": "Planning"})
    status = get(control_plane, "-n", namespace, "sdd", "s")["status"]
    assert status == {"observedGeneration": 1, "phase": "Planning"}


def test_a_status_write_never_overwrites_a_newer_writer(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str
) -> None:
    """Issue 23 item 9: the status is written at the version the sync read; a write made in
    between (another replica, a spec edit) makes it a 409 instead of being overwritten."""
    from support.api_controllers import get, seeds_example

    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(namespace, "rv")))
    read = get(control_plane, "-n", namespace, "sdd", "rv")["metadata"]["resourceVersion"]
    cluster = KubeCluster(control_plane.api_client())
    newer = cluster.patch_status(namespace, "rv", {"phase": "Warming"}, read)
    assert newer is not None
    assert newer != read
    with pytest.raises(ClusterError) as conflict:  # computed from the object at `read`
        cluster.patch_status(namespace, "rv", {"phase": "Planning"}, read)
    assert conflict.value.status == 409
    # observedGeneration 0: the CRD's status default, which these writes leave alone (issue 39)
    unobserved = {"observedGeneration": 0}
    assert get(control_plane, "-n", namespace, "sdd", "rv")["status"] == {
        **unobserved,
        "phase": "Warming",
    }
    assert cluster.patch_status(namespace, "rv", {"phase": "Ready"}, newer) is not None
    assert get(control_plane, "-n", namespace, "sdd", "rv")["status"] == {
        **unobserved,
        "phase": "Ready",
    }


def test_one_client_reuses_its_pooled_connections(
    control_plane: ControlPlane, namespace: str
) -> None:
    """Issue 14 item 3: calls from the sync threads share a pool of kept-alive connections."""
    configuration = client.Configuration()
    config.load_kube_config(str(control_plane.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 4  # as KubeCluster.connect sizes it
    cluster = KubeCluster(client.ApiClient(configuration))

    def reads(_: int) -> None:
        for _ in range(10):
            cluster.list_pods(namespace, "app=absent")

    with ThreadPoolExecutor(4) as pool:
        list(pool.map(reads, range(4)))
    opened, sent = cluster.connections()
    assert sent == 40
    assert 1 <= opened <= 4, f"{opened} connections for 40 requests from 4 threads"


def job(namespace: str, name: str) -> dict[str, Any]:
    container = {"name": "main", "image": "registry.example.com/none:1"}
    pod = {"restartPolicy": "Never", "containers": [container]}
    meta = {"name": name, "namespace": namespace, "labels": {"app": "cache"}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": meta,
        "spec": {"template": {"spec": pod}},
    }


def test_a_list_shows_at_least_the_last_watch_event_and_waits_for_no_newer(
    cluster: KubeCluster, namespace: str
) -> None:
    """Jobs and Pods are listed from the watch cache NotOlderThan the watch's last event."""
    created = cluster.create(job(namespace, "one"))
    assert created is not None
    version = created["metadata"]["resourceVersion"]
    cluster.versions.seen("Job", namespace, version)  # as the watch of the children would
    assert [j["metadata"]["name"] for j in cluster.list_objects("Job", namespace, "app=cache")] == [
        "one"
    ]
    # A version the cache has not reached (never from a real watch): an error to retry, not
    # a list that may be older than the event that asked for it.
    cluster.versions.seen("Job", namespace, str(int(version) + 10**9))
    with pytest.raises(ClusterError) as raised:
        cluster.list_objects("Job", namespace, "app=cache")
    assert raised.value.status == 504


def test_events_are_read_by_object_and_a_pod_condition_is_set(
    control_plane: ControlPlane, cluster: KubeCluster, namespace: str
) -> None:
    """The reads of a pending warmup (its Events) and the serving gate's condition write."""
    core = client.CoreV1Api(control_plane.api_client())
    for uid in ("uid-a", "uid-b"):
        event = {
            "metadata": {"generateName": "e-", "namespace": namespace},
            "involvedObject": {"kind": "Job", "name": "j", "namespace": namespace, "uid": uid},
            "reason": "FailedCreate",
            "message": f"about {uid}",
            "type": "Warning",
        }
        core.create_namespaced_event(namespace, event)
    assert [e["message"] for e in cluster.events(namespace, "uid-a")] == ["about uid-a"]
    container = {"name": "main", "image": "registry.example.com/none:1"}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace, "labels": {"app": "gate"}},
        "spec": {
            "containers": [container],
            "readinessGates": [{"conditionType": "warmgate.dev/x"}],
        },
    }
    core.create_namespaced_pod(namespace, pod)
    condition = {"type": "warmgate.dev/x", "status": "True", "reason": "Verified"}
    cluster.set_pod_condition(namespace, "p", condition)
    (found,) = cluster.list_pods(namespace, "app=gate")
    conditions = {c["type"]: c for c in found["status"]["conditions"]}
    assert conditions["warmgate.dev/x"]["reason"] == "Verified"
