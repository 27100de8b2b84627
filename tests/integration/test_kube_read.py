"""The tests' in-process `kubectl get` (support/kube_read.py) reads what kubectl prints, against
the real API server, and leaves to kubectl what it does not handle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.api_controllers import seeds_example
from support.kube_read import Reader, as_list

from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration


def _kubectl(cp: ControlPlane, *args: str) -> dict[str, Any]:
    return dict(json.loads(cp.kubectl("get", *args, "-o", "json").stdout))


def _comparable(doc: dict[str, Any]) -> dict[str, Any]:
    """kubectl hides managedFields (--show-managed-fields=false); the read keeps them."""
    doc = json.loads(json.dumps(doc))
    for item in [doc, *doc.get("items", [])]:
        item.get("metadata", {}).pop("managedFields", None)
    return doc


@pytest.fixture(scope="module")
def objects(warmgate_crd: ControlPlane, module_namespace: str) -> str:
    cp, ns = warmgate_crd, module_namespace
    for name, tier in (("a", "front"), ("b", "front"), ("c", "back")):
        cp.kubectl("create", "configmap", name, "-n", ns, "--from-literal=k=v")
        cp.kubectl("label", "configmap", name, "-n", ns, f"tier={tier}")
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "sdd-a")))
    return ns


@pytest.mark.parametrize(
    "args",
    [
        ("configmap", "a"),
        ("configmaps/b",),
        ("cm", "c"),
        ("sdd", "sdd-a"),
        ("specdecodedeployment", "sdd-a"),
        ("specdecodedeployments.warmgate.dev", "sdd-a"),
        ("configmaps", "-l", "tier=front"),
        ("configmaps", "--selector=tier in (back)"),
        ("sdd",),
    ],
    ids=" ".join,
)
def test_the_read_is_what_kubectl_prints(
    warmgate_crd: ControlPlane, objects: str, args: tuple[str, ...]
) -> None:
    cp, ns = warmgate_crd, objects
    got = Reader(cp.kubeconfig).get(*args, "-n", ns)
    assert got is not None, "the reader left a plain get to kubectl"
    assert _comparable(got) == _comparable(_kubectl(cp, *args, "-n", ns))


def test_a_list_names_each_items_kind_as_kubectl_does(
    warmgate_crd: ControlPlane, objects: str
) -> None:
    got = Reader(warmgate_crd.kubeconfig).get("configmaps", "-n", objects, "-l", "tier")
    assert got is not None
    assert got["kind"] == "List"
    assert sorted(i["metadata"]["name"] for i in got["items"]) == ["a", "b", "c"]
    assert {(i["apiVersion"], i["kind"]) for i in got["items"]} == {("v1", "ConfigMap")}


def test_all_namespaces_reads_every_namespace(warmgate_crd: ControlPlane, objects: str) -> None:
    got = Reader(warmgate_crd.kubeconfig).get("sdd", "-A")
    assert got is not None
    assert (objects, "sdd-a") in {
        (i["metadata"]["namespace"], i["metadata"]["name"]) for i in got["items"]
    }


@pytest.mark.parametrize(
    "args",
    [
        ("configmap", "not-there"),  # kubectl's NotFound, its message and exit code
        ("configmaps,secrets",),  # several kinds
        ("configmap", "a", "--show-labels"),  # a flag the reader does not know
        ("no-such-kind",),
        ("namespace/a/b",),
    ],
    ids=" ".join,
)
def test_what_the_read_does_not_handle_is_left_to_kubectl(
    warmgate_crd: ControlPlane, objects: str, args: tuple[str, ...]
) -> None:
    assert Reader(warmgate_crd.kubeconfig).get(*args, "-n", objects) is None


def test_a_crd_installed_after_the_first_read_is_found(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, objects: str
) -> None:
    """Discovery is read again when a name is not in it (a CRD installed since)."""
    reader = Reader(control_plane.kubeconfig)
    assert reader.get("configmap", "a", "-n", objects) is not None
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "readtests.kube-read.warmgate.dev"},
        "spec": {
            "group": "kube-read.warmgate.dev",
            "names": {"kind": "ReadTest", "plural": "readtests", "shortNames": ["rdt"]},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }
            ],
        },
    }
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(crd))
    try:
        control_plane.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s",
            "crd/readtests.kube-read.warmgate.dev",
        )  # fmt: skip
        got = reader.get("rdt", "-n", objects)
        assert got == as_list([])
    finally:
        control_plane.kubectl("delete", "crd", "readtests.kube-read.warmgate.dev", check=False)
