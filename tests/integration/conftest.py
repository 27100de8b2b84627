"""Session fixtures for integration tests: a real etcd + kube-apiserver started on loopback."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest
from support.fault_proxy import FaultProxy
from support.operators import OPERATOR_ENV, running_operator
from support.paths import CRD_PATH

from warmgate.devcluster.controlplane import (
    AssetsUnavailableError,
    ControlPlane,
    OperatorProcess,
    find_assets,
)


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
    crd = str(CRD_PATH)
    control_plane.kubectl("apply", "--server-side", "--force-conflicts", "-f", crd)
    control_plane.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", crd)
    return control_plane


@contextlib.contextmanager
def fresh_namespace(control_plane: ControlPlane, stem: str) -> Iterator[str]:
    """A new namespace named after ``stem``; deleted without waiting (no controller-manager
    runs here, so a namespace deletion never completes)."""
    stem = re.sub(r"[^a-z0-9-]", "-", stem.lower())[:40].strip("-")
    name = f"{stem}-{uuid.uuid4().hex[:6]}"
    control_plane.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        control_plane.kubectl("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture
def namespace(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test."""
    with fresh_namespace(control_plane, request.node.name) as name:
        yield name


@pytest.fixture(scope="module")
def module_namespace(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, request: pytest.FixtureRequest
) -> Iterator[str]:
    """One namespace for a module whose operator process watches it: started once, not per test."""
    with fresh_namespace(control_plane, request.module.__name__.removeprefix("test_")) as name:
        yield name


@pytest.fixture(scope="module")
def operator_env() -> dict[str, str]:
    """The environment of the module's operator: a resync every second (a module may override
    it)."""
    return dict(OPERATOR_ENV)


@pytest.fixture(scope="module")
def operator(
    control_plane: ControlPlane,
    module_namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
    operator_env: dict[str, str],
) -> Iterator[OperatorProcess]:
    """The module's operator process on its namespace, with ``operator_env``."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with running_operator(control_plane, module_namespace, log, operator_env) as op:
        yield op


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[FaultProxy]:
    """A relay in front of the API server that a test can stall, heal or reset."""
    server = urlsplit(control_plane.server)
    found = FaultProxy(server.hostname or "127.0.0.1", server.port or 443)
    yield found
    found.close()
