"""Issue 24 item 6: an unwarmed shape in production reaches the status within the runner poll.

The operator runs with a one-hour safety resync and polls the serving runners every 3 s, so
the shape can only reach the status through the poll (`runtime/runner_watch.py`). The test
prints the delay it measured (docs/operator.md, "How progress and drift reach the operator").
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from support.api_controllers import get
from support.kube_objects import condition_map
from support.runner_pods import (
    post_unwarmed,
    serving_on_loopback,
    wait_until,
)

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]
POLL_S = 3


@pytest.fixture(scope="module")
def operator_env() -> dict[str, str]:
    """An hourly resync: only the runner poll can bring the drift in time."""
    return {
        "WARMGATE_RESYNC_SECONDS": "3600",
        "WARMGATE_RUNNER_POLL_SECONDS": str(POLL_S),
        "WARMGATE_OPERATOR_IMAGE": "warmgate:test",
    }


def test_an_unwarmed_shape_reaches_the_status_within_the_poll_not_the_resync(
    control_plane: ControlPlane, operator: OperatorProcess, module_namespace: str, tmp_path: Path
) -> None:
    ns, cp = module_namespace, control_plane
    with serving_on_loopback(cp, ns, "polled", tmp_path) as engine_port:
        time.sleep(POLL_S + 1)  # the sync that opened the gate has read the runner: at rest now
        began = time.monotonic()
        post_unwarmed(engine_port, [["decode", 3, 1, 40]])
        wait_until(
            lambda: (
                condition_map(get(cp, "-n", ns, "sdd", "polled"))["Ready"][1]
                == "UnwarmedShapeObserved"
            ),
            timeout=120,
        )
        took = time.monotonic() - began
        print(f"\nunwarmed shape -> status.drift in {took:.1f} s (poll {POLL_S} s, resync 3600 s)")
        assert took < 120  # the resync is an hour away: only the poll can have brought it
        drift = get(cp, "-n", ns, "sdd", "polled")["status"]["drift"]
        assert drift["shapes"] == ["('decode', 3, 1, 40)"]
