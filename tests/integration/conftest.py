"""Session fixtures for integration tests: a real etcd + kube-apiserver started on loopback."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import pytest

from warmgate.api.constants import CRD_FILE
from warmgate.controlplane import REPO_ROOT, AssetsUnavailableError, ControlPlane, find_assets


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    """The real control plane; provisioned on first use, skipped (or failed in CI) without it."""
    try:
        assets = find_assets(provision=True)
    except AssetsUnavailableError as exc:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"integration tests need a control plane under CI: {exc}")
        pytest.skip(f"no real control plane: {exc}")
    with ControlPlane(assets) as cp:
        yield cp


@pytest.fixture(scope="session")
def warmgate_crd(control_plane: ControlPlane) -> ControlPlane:
    """The generated SpecDecodeDeployment CRD, installed once per session and established."""
    crd = str(REPO_ROOT / CRD_FILE)
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", crd)
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", crd)
    return control_plane


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test (without a controller-manager, deletion never completes)."""
    stem = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
