"""Scenario j: Pod Security admission and the reasons a warmup Pod waits (issue 11 items 4, 10;
issue 23 item 14).

Two namespaces, one enforcing Pod Security "baseline", one "restricted", on the real node.
By default an SDD's Pods meet "restricted" and go Ready there (user 1000, every capability
dropped). The opt-out, spec.podSecurity baseline (the image's own user), goes Ready under
baseline and is refused under restricted: the Job controller cannot create the Pod and says why
only in a FailedCreate Event, which the SDD reports. Two more SDDs wait for what the kubelet
cannot give them: a token Secret that does not exist (CreateContainerConfigError) and an image
no registry has (ErrImagePull / ImagePullBackOff).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from e2e_support import E2ECluster, condition, sdd, wait_for

WAITING = {
    "no-secret": ("CreateContainerConfigError",),
    "no-image": ("ErrImagePull", "ImagePullBackOff"),
}


@pytest.fixture(scope="module")
def restricted(e2e: E2ECluster, namespace: str) -> Iterator[str]:
    """A second namespace, enforcing restricted; the module's own one enforces baseline."""
    e2e.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=baseline")
    name = f"restricted-{uuid.uuid4().hex[:6]}"
    e2e.kubectl("create", "namespace", name)
    e2e.kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted")
    yield name
    e2e.kubectl("delete", "namespace", name, "--wait=false", check=False)


def _ready(e2e: E2ECluster, ns: str, name: str) -> Any:
    return e2e.wait_ready(ns, name)


def _reason(e2e: E2ECluster, ns: str, name: str, reasons: tuple[str, ...]) -> dict[str, Any]:
    def seen() -> dict[str, Any] | None:
        warmed = condition(e2e.get_or_none("sdd", "-n", ns, name), "Warmed")
        return warmed if warmed.get("reason") in reasons else None

    return dict(wait_for(f"{name}: Warmed {reasons}", seen, 180))


@pytest.fixture(scope="module")
def run(e2e: E2ECluster, namespace: str, restricted: str) -> dict[str, Any]:
    image = e2e.images.engine.ref
    e2e.apply(sdd("baseline", namespace, image, pod_security="baseline"))
    e2e.apply(sdd("as-root", restricted, image, pod_security="baseline"))
    e2e.apply(sdd("non-root", restricted, image))
    secret = sdd("no-secret", restricted, image)
    secret["spec"]["model"]["tokenSecretRef"] = {"name": "hf-token-missing"}
    e2e.apply(secret)
    e2e.apply(sdd("no-image", restricted, "localhost/warmgate-no-such-image:1"))
    return {
        "baseline": _ready(e2e, namespace, "baseline"),
        "non-root": _ready(e2e, restricted, "non-root"),
        "as-root": _reason(e2e, restricted, "as-root", ("FailedCreate",)),
        **{name: _reason(e2e, restricted, name, r) for name, r in WAITING.items()},
    }


def test_baseline_admits_the_opt_out_with_the_images_user(
    e2e: E2ECluster, namespace: str, run: dict[str, Any]
) -> None:
    assert run["baseline"].returncode == 0, run["baseline"].stderr
    for pod in e2e.items("pods", namespace, "baseline"):
        assert "runAsUser" not in pod["spec"]["securityContext"]


def test_restricted_admits_the_default_pods(
    e2e: E2ECluster, restricted: str, run: dict[str, Any]
) -> None:
    assert run["non-root"].returncode == 0, run["non-root"].stderr
    pods = e2e.items("pods", restricted, "non-root")
    assert pods
    for pod in pods:
        assert pod["spec"]["securityContext"]["runAsUser"] == 1000
        assert pod["spec"]["automountServiceAccountToken"] is False
        for container in pod["spec"]["containers"]:
            assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_restricted_refuses_the_baseline_opt_out_and_the_user_reads_why(
    run: dict[str, Any],
) -> None:
    warmed = run["as-root"]
    assert warmed["status"] == "False"
    assert 'violates PodSecurity "restricted:latest"' in warmed["message"]
    assert "warming" not in warmed["message"]


@pytest.mark.parametrize("name", sorted(WAITING))
def test_a_pod_the_kubelet_cannot_start_says_why(name: str, run: dict[str, Any]) -> None:
    warmed = run[name]
    assert warmed["status"] == "False"
    assert "warming" not in warmed["message"]
    expected = "hf-token-missing" if name == "no-secret" else "warmgate-no-such-image"
    assert expected in warmed["message"]
