"""The operator as its own process in a test: started on a namespace, alive, stopped after."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

# What most tests run the operator with: a resync every second, a test image for its Jobs.
OPERATOR_ENV = {"WARMGATE_RESYNC_SECONDS": "1", "WARMGATE_OPERATOR_IMAGE": "warmgate:test"}


@contextlib.contextmanager
def running_operator(
    control_plane: ControlPlane, namespace: str, log: Path, env: dict[str, str] | None = None
) -> Iterator[OperatorProcess]:
    """The operator as its own process on ``namespace``, alive, stopped afterwards."""
    op = OperatorProcess(control_plane.kubeconfig, namespace, log, env=env)
    try:
        yield op.wait_alive()
    finally:
        op.stop()
