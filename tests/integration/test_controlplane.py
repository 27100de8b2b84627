"""The test harness's control plane is a real apiserver: CRDs, schema validation, RBAC, tokens."""

from __future__ import annotations

import json
import textwrap

import pytest

from warmgate.devcluster.controlplane import K8S_VERSION, ControlPlane

pytestmark = pytest.mark.integration

# A small CRD of the harness's own, so this file tests the harness and not warmgate's API.
GADGET_CRD = textwrap.dedent(
    """
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata: {name: gadgets.harness.warmgate.dev}
    spec:
      group: harness.warmgate.dev
      scope: Namespaced
      names: {kind: Gadget, plural: gadgets, singular: gadget}
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                required: [size]
                properties:
                  size: {type: integer, minimum: 1, maximum: 64}
                  colour: {type: string, enum: [red, blue], default: red}
    """
)


def gadget(name: str, size: object) -> str:
    return json.dumps(
        {
            "apiVersion": "harness.warmgate.dev/v1",
            "kind": "Gadget",
            "metadata": {"name": name},
            "spec": {"size": size},
        }
    )


@pytest.fixture(scope="module")
def gadget_crd(control_plane: ControlPlane) -> str:
    control_plane.kubectl("apply", "-f", "-", stdin=GADGET_CRD)
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=30s", "crd/gadgets.harness.warmgate.dev"
    )
    return "gadgets.harness.warmgate.dev"


def test_server_is_the_pinned_release(control_plane: ControlPlane) -> None:
    version = json.loads(control_plane.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == K8S_VERSION


def test_crd_is_established(control_plane: ControlPlane, gadget_crd: str) -> None:
    out = control_plane.kubectl("get", "crd", gadget_crd, "-o", "json").stdout
    conditions = {c["type"]: c["status"] for c in json.loads(out)["status"]["conditions"]}
    assert conditions["Established"] == "True"
    assert conditions["NamesAccepted"] == "True"


def test_valid_object_round_trips_with_server_defaults(
    control_plane: ControlPlane, gadget_crd: str, namespace: str
) -> None:
    control_plane.kubectl("apply", "-n", namespace, "-f", "-", stdin=gadget("g1", 8))
    got = json.loads(
        control_plane.kubectl("get", "-n", namespace, "gadget", "g1", "-o", "json").stdout
    )
    assert got["spec"] == {"size": 8, "colour": "red"}  # colour defaulted by the server


def test_schema_violation_is_refused_by_the_server(
    control_plane: ControlPlane, gadget_crd: str, namespace: str
) -> None:
    res = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=gadget("g2", 65), check=False
    )
    assert res.returncode != 0
    assert "spec.size: Invalid value: 65: spec.size in body should be less than or equal to 64" in (
        res.stderr
    )
    res = control_plane.kubectl(
        "apply", "-n", namespace, "-f", "-", stdin=gadget("g3", "big"), check=False
    )
    assert 'spec.size: Invalid value: "string": spec.size in body must be of type integer' in (
        res.stderr
    )


def test_rbac_denies_a_service_account_without_roles(
    control_plane: ControlPlane, gadget_crd: str, namespace: str
) -> None:
    control_plane.kubectl("create", "serviceaccount", "nobody", "-n", namespace)
    token = control_plane.kubectl("create", "token", "nobody", "-n", namespace).stdout.strip()
    res = control_plane.kubectl("--token", token, "get", "gadgets", "-n", namespace, check=False)
    assert res.returncode != 0
    assert f'User "system:serviceaccount:{namespace}:nobody" cannot list resource "gadgets"' in (
        res.stderr
    )
    control_plane.kubectl(
        "create",
        "role",
        "gadget-reader",
        "--verb=get,list",
        "--resource=gadgets.harness.warmgate.dev",
        "-n",
        namespace,
    )
    control_plane.kubectl(
        "create",
        "rolebinding",
        "gadgets",
        "--role=gadget-reader",
        f"--serviceaccount={namespace}:nobody",
        "-n",
        namespace,
    )
    allowed = control_plane.kubectl("--token", token, "get", "gadgets", "-n", namespace)
    assert allowed.returncode == 0


def test_kubernetes_client_uses_the_same_kubeconfig(control_plane: ControlPlane) -> None:
    from kubernetes import client

    with control_plane.api_client() as api:
        names = [ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items]
    assert "default" in names
