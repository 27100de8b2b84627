"""Issue 23 item 9 (issue 14 item 4 before it): two operator processes with leader election on a
Lease; exactly one acts, the other takes over when the active one dies or stops.

Both run against the real API server with `WARMGATE_LEADER_LEASE` and short timings. The first
one started holds the Lease; the second stands by without starting kopf. Which process acted is
read from each process's own `/metrics`: the plannings it ran and the API requests its client
sent.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.api_controllers import get, seeds_example
from support.polling import eventually

from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

LEASE = "warmgate-test"
DURATION, RENEW, RETRY = 6, 4, 1  # seconds: a standby takes an unrenewed Lease after 6 s


def start(cp: ControlPlane, ns: str, log: Path) -> OperatorProcess:
    env = {
        "WARMGATE_LEADER_LEASE": LEASE,
        "WARMGATE_LEASE_NAMESPACE": ns,
        "WARMGATE_LEASE_DURATION": str(DURATION),
        "WARMGATE_LEASE_RENEW_DEADLINE": str(RENEW),
        "WARMGATE_LEASE_RETRY_PERIOD": str(RETRY),
        "WARMGATE_OPERATOR_IMAGE": "warmgate:test",
    }
    return OperatorProcess(cp.kubeconfig, ns, log, env=env).wait_alive()


def holder(cp: ControlPlane, ns: str) -> str:
    done = cp.kubectl("get", "lease", "-n", ns, LEASE, "-o", "json", check=False)
    if done.returncode != 0:
        return ""
    return str(json.loads(done.stdout)["spec"].get("holderIdentity") or "")


@pytest.fixture
def pair(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, namespace: str, tmp_path: Path
) -> Iterator[tuple[OperatorProcess, OperatorProcess]]:
    active = start(control_plane, namespace, tmp_path / "active.log")
    standby: OperatorProcess | None = None
    try:
        assert eventually(lambda: holder(control_plane, namespace) != "", 30)
        standby = start(control_plane, namespace, tmp_path / "standby.log")
        yield active, standby
    finally:
        for op in (active, standby):
            if op is not None:
                op.stop()  # also closes the log of one the test killed


def _health(op: OperatorProcess) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{op.health_port}/healthz", timeout=5) as ok:
        return int(ok.status)


def _counter(op: OperatorProcess, name: str) -> float:
    lines = [ln for ln in op.get("/metrics").splitlines() if ln.startswith(f"{name} ")]
    return float(lines[0].split()[1]) if lines else 0.0


def _plannings(op: OperatorProcess) -> float:
    return _counter(op, "warmgate_plan_cache_misses_total")


def _job_of(cp: ControlPlane, ns: str, name: str) -> str | None:
    found = get(cp, "-n", ns, "sdd", name)
    return ((found.get("status") or {}).get("warmup") or {}).get("jobName")


def test_one_acts_and_the_standby_takes_over_when_it_dies(
    control_plane: ControlPlane, pair: tuple[OperatorProcess, OperatorProcess], namespace: str
) -> None:
    active, standby = pair
    ns = namespace
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "first")))
    assert eventually(lambda: _job_of(control_plane, ns, "first") is not None, 60)
    assert _plannings(active) == 1
    assert _plannings(standby) == 0  # standing by: it neither planned nor synced
    assert _counter(standby, "warmgate_api_requests_total") == 0  # nor read or wrote
    assert _counter(standby, "warmgate_api_connections_opened_total") == 0
    assert _health(standby) == 200  # alive while standing by
    leader = holder(control_plane, ns)

    active.proc.kill()  # no goodbye: the standby waits until the Lease is 6 s unchanged
    active.proc.wait()
    killed = time.monotonic()
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "second")))
    assert eventually(lambda: _job_of(control_plane, ns, "second") is not None, 4 * DURATION + 30)
    took = time.monotonic() - killed
    assert holder(control_plane, ns) not in ("", leader)
    assert _plannings(standby) == 1  # it took over: one plan, shared by both objects
    assert _counter(standby, "warmgate_api_requests_total") > 0
    assert took >= DURATION - RETRY  # never before the Lease could expire
    print(f"failover after SIGKILL: {took:.1f} s (lease duration {DURATION} s)")


def test_a_graceful_stop_hands_over_at_once(
    control_plane: ControlPlane, pair: tuple[OperatorProcess, OperatorProcess], namespace: str
) -> None:
    active, standby = pair
    ns = namespace
    stopped = time.monotonic()
    active.stop()  # SIGTERM: kopf stops, the syncs end, then the Lease is released
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "handed")))
    assert eventually(lambda: _job_of(control_plane, ns, "handed") is not None, 60)
    took = time.monotonic() - stopped
    assert _plannings(standby) == 1
    assert took < DURATION  # released: not the lease duration
    print(f"failover after SIGTERM: {took:.1f} s")
