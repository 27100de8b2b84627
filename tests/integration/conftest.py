"""Session fixtures for integration tests: a real etcd + kube-apiserver started on loopback."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator

import pytest

from warmgate.controlplane import AssetsUnavailableError, ControlPlane, find_assets


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


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test (without a controller-manager, deletion never completes)."""
    stem = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    yield name
    control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)
