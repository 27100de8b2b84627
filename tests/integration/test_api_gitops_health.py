"""A new SpecDecodeDeployment as the real API server serves it, read by the GitOps readers.

Issue 39 item 2: an object applied a moment ago, without a status until the operator's first
status write, read Current to kstatus (sigs.k8s.io/cli-utils `status.Compute`: its generic
rules find nothing to wait for). The CRD's one status default, `{observedGeneration: 0}`, is
applied by the API server on every read (GET, LIST and WATCH: what Flux's poller and Argo
CD's cache read); generation 1 against 0 is InProgress to kstatus's own generation rule. No
operator runs here: the object stays as applied.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from support.api_controllers import get
from support.examples import example_doc
from support.gitops_health import MEANING, read, statuses

from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration

GROUP, VERSION, PLURAL = "warmgate.dev", "v1alpha1", "specdecodedeployments"


def test_a_new_object_is_served_with_observed_generation_0_and_reads_in_progress(
    warmgate_crd: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    cp = warmgate_crd
    doc = example_doc("minimal-ngram")
    doc["metadata"]["namespace"] = namespace
    doc["status"] = {"observedGeneration": 1, "phase": "Ready"}  # dropped: the status subresource
    name = doc["metadata"]["name"]
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(doc))
    got = _get(cp, namespace, name)
    assert got["metadata"]["generation"] == 1
    assert got["status"] == {"observedGeneration": 0}
    reading = read(got, tmp_path)
    assert reading["kstatus"]["message"] == (
        "SpecDecodeDeployment generation is 1, but latest observed generation is 0"
    )
    assert statuses(reading) == MEANING["InProgress"]

    api = client.CustomObjectsApi(cp.api_client())
    listed = api.list_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL)
    assert [item["status"] for item in listed["items"]] == [{"observedGeneration": 0}]
    # Another kind written since: etcd's version moves on and this kind's watch cache does not
    # (what made the consistent watch fail, _first_watch_event).
    cp.kubectl("create", "configmap", "after-the-object", "-n", namespace)
    assert _first_watch_event(api, namespace) == ("ADDED", {"observedGeneration": 0})

    # The operator's first write replaces it (here written by the test: no operator runs).
    written = {"observedGeneration": 1, "phase": "Pending"}
    patch = json.dumps({"status": written})
    cp.kubectl(
        "patch", "sdd", name, "-n", namespace, "--subresource=status", "--type=merge", "-p", patch
    )
    assert _get(cp, namespace, name)["status"] == written


def _first_watch_event(api: client.CustomObjectsApi, namespace: str) -> tuple[str, dict[str, Any]]:
    """The first event of a watch from resourceVersion "0", as an informer starts: the API
    server's watch cache sends the object as it stands, an ADDED event (or the creation's own
    ADDED, live, if the cache had not seen it yet).

    Not a watch with no resourceVersion: that is a consistent read, which first waits until the
    kind's watch cache has caught up with etcd's latest version, and with etcd 3.4 (no progress
    requests) a kind's cache moves only with its own events. Once anything else was written,
    the wait ends in a 504 "Too large resource version" after the API server's fixed 3 s (CI,
    twice; five tries in a row failed alike; warmgate/kube/kube_cluster.py says the same of
    lists)."""
    w = watch.Watch()
    for event in w.stream(
        api.list_namespaced_custom_object,
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        resource_version="0",
        timeout_seconds=30,
    ):
        w.stop()
        return event["type"], event["object"]["status"]
    raise AssertionError("the watch ended with no event: the object was not served")


def _get(cp: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    return get(cp, "sdd", name, "-n", namespace)
