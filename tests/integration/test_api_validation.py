"""The real kube-apiserver refuses every bad manifest of the corpus with the recorded message."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from support.bad_manifests import BadCase, base_manifest, load_cases
from support.kubectl import submit

from warmgate.api.constants import GROUP, PLURAL, VERSION
from warmgate.devcluster.controlplane import ControlPlane

pytestmark = pytest.mark.integration
CASES = load_cases()


@pytest.fixture(scope="module")
def crd_namespace(control_plane: ControlPlane, warmgate_crd: ControlPlane) -> Iterator[str]:
    """The generated CRD installed (idempotently) and one namespace for every dry run."""
    name = f"api-validation-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _dry_run(cp: ControlPlane, namespace: str, manifest: dict[str, object]) -> str:
    """stderr of a strict server-side dry-run create; fails the test if the server accepts."""
    result = submit(
        cp, namespace, manifest, "create", "--dry-run=server", as_json=False, check=False
    )
    assert result.returncode != 0, f"the apiserver accepted it:\n{result.stdout}"
    return result.stderr


def test_the_base_manifest_is_accepted(control_plane: ControlPlane, crd_namespace: str) -> None:
    result = submit(
        control_plane, crd_namespace, base_manifest(), "create", "--dry-run=server", as_json=False
    )
    assert "created (server dry run)" in result.stdout


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_server_refuses(control_plane: ControlPlane, crd_namespace: str, case: BadCase) -> None:
    stderr = _dry_run(control_plane, crd_namespace, case.manifest)
    for expect in case.expect:
        assert expect in stderr


def test_api_clients_get_the_same_message_with_field_validation_strict(
    control_plane: ControlPlane, crd_namespace: str
) -> None:
    from kubernetes import client

    case = next(c for c in CASES if c.name == "unknown-field-engine")
    api = client.CustomObjectsApi(control_plane.api_client())
    with pytest.raises(client.ApiException) as info:
        api.create_namespaced_custom_object(
            GROUP,
            VERSION,
            crd_namespace,
            PLURAL,
            case.manifest,
            dry_run="All",
            field_validation="Strict",
        )
    assert info.value.status == 400
    assert case.expect[0] in json.loads(info.value.body)["message"]


@pytest.mark.parametrize(
    "how",
    [("create", "--dry-run=server"), ("apply", "--server-side", "--dry-run=server")],
    ids=["kubectl-default", "server-side-apply"],
)
def test_unknown_fields_are_refused_by_default_kubectl_and_server_side_apply(
    control_plane: ControlPlane, crd_namespace: str, how: tuple[str, ...]
) -> None:
    case = next(c for c in CASES if c.name == "unknown-field-engine")
    result = control_plane.kubectl(
        *how, "-n", crd_namespace, "-f", "-", stdin=json.dumps(case.manifest), check=False
    )
    assert result.returncode != 0
    assert "maxModelLength" in result.stderr


def test_unknown_fields_are_pruned_silently_without_strict_validation(
    control_plane: ControlPlane, crd_namespace: str
) -> None:
    """Why the corpus uses --validate=strict: with validation off the field just disappears."""
    case = next(c for c in CASES if c.name == "unknown-field-engine")
    result = control_plane.kubectl(
        "create",
        "--dry-run=server",
        "--validate=false",
        "-n",
        crd_namespace,
        "-o",
        "json",
        "-f",
        "-",
        stdin=json.dumps(case.manifest),
    )
    assert "maxModelLength" not in json.loads(result.stdout)["spec"]["engine"]


def test_updates_are_validated_too(control_plane: ControlPlane, crd_namespace: str) -> None:
    manifest = base_manifest()
    manifest["metadata"]["name"] = "update-me"
    control_plane.kubectl("create", "-n", crd_namespace, "-f", "-", stdin=json.dumps(manifest))
    patch = json.dumps({"spec": {"speculative": {"method": "ngram"}}})
    result = control_plane.kubectl(
        "patch", "sdd", "update-me", "-n", crd_namespace, "--type=merge", "-p", patch, check=False
    )
    assert result.returncode != 0
    assert "draftModel must not be set when method is mtp or ngram" in result.stderr
