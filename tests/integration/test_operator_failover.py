"""Issue 14 item 4: two operator processes with kopf peering; exactly one acts, the other takes
over when the active one dies.

Both run against the real API server with `WARMGATE_PEERING` (a KopfPeering object in the
watched namespace) and a short peering lifetime. The older process has the higher priority
(`handlers/peering.py`), so the younger one starts as the standby. Which process acted is read
from each process's own `/metrics`: the plannings it ran and the API requests its client sent.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.api_controllers import seeds_example
from support.polling import eventually

from warmgate.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PEERING_CRDS = Path(__file__).resolve().parents[2] / "crds" / "kopf.dev_peerings.yaml"
LIFETIME = 6  # seconds: a replica silent this long is presumed dead by the other


@pytest.fixture(scope="module")
def peering_crds(control_plane: ControlPlane) -> None:
    control_plane.kubectl("apply", "--server-side", "-f", str(PEERING_CRDS))
    control_plane.kubectl(
        "wait", "--for=condition=Established", "--timeout=60s", "-f", str(PEERING_CRDS)
    )


def start(cp: ControlPlane, ns: str, log: Path) -> OperatorProcess:
    env = {
        "WARMGATE_PEERING": "warmgate-test",
        "WARMGATE_PEERING_LIFETIME": str(LIFETIME),
        "WARMGATE_OPERATOR_IMAGE": "warmgate:test",
    }
    return OperatorProcess(cp.kubeconfig, ns, log, env=env).wait_alive()


@pytest.fixture
def pair(
    control_plane: ControlPlane,
    warmgate_crd: ControlPlane,
    peering_crds: None,
    namespace: str,
    tmp_path: Path,
) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    active = start(control_plane, namespace, tmp_path / "active.log")
    standby: OperatorProcess | None = None
    try:
        time.sleep(1)  # strictly older: the higher priority
        standby = start(control_plane, namespace, tmp_path / "standby.log")
        yield active, standby
    finally:
        for op in (active, standby):
            if op is not None:
                op.stop()  # also closes the log of one the test killed


def _counter(op: OperatorProcess, name: str) -> float:
    lines = [ln for ln in op.get("/metrics").splitlines() if ln.startswith(f"{name} ")]
    return float(lines[0].split()[1]) if lines else 0.0


def _plannings(op: OperatorProcess) -> float:
    return _counter(op, "warmgate_plan_cache_misses_total")


def _job_of(cp: ControlPlane, ns: str, name: str) -> str | None:
    found = json.loads(cp.kubectl("get", "-n", ns, "sdd", name, "-o", "json").stdout)
    return ((found.get("status") or {}).get("warmup") or {}).get("jobName")


def test_one_acts_and_the_standby_takes_over_when_it_dies(
    control_plane: ControlPlane, pair: tuple[OperatorProcess, OperatorProcess], namespace: str
) -> None:
    active, standby = pair
    ns = namespace
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "first")))
    assert eventually(lambda: _job_of(control_plane, ns, "first") is not None, 60)
    assert _plannings(active) == 1
    assert _plannings(standby) == 0  # paused: it neither planned nor synced
    standby_requests = _counter(standby, "warmgate_api_requests_total")

    active.proc.kill()  # no goodbye: the standby waits out the active one's lifetime
    active.proc.wait()
    killed = time.monotonic()
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "second")))
    assert eventually(lambda: _job_of(control_plane, ns, "second") is not None, 4 * LIFETIME + 30)
    took = time.monotonic() - killed
    assert _plannings(standby) == 1  # it took over: one plan, shared by both objects
    assert _counter(standby, "warmgate_api_requests_total") > standby_requests
    print(f"failover after SIGKILL: {took:.1f} s (peering lifetime {LIFETIME} s)")


def test_a_graceful_stop_hands_over_at_once(
    control_plane: ControlPlane, pair: tuple[OperatorProcess, OperatorProcess], namespace: str
) -> None:
    active, standby = pair
    ns = namespace
    active.stop()  # SIGTERM: kopf removes its keep-alive from the peering object
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "handed")))
    assert eventually(lambda: _job_of(control_plane, ns, "handed") is not None, 60)
    assert _plannings(standby) == 1
