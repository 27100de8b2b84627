"""Issue 23 item 8: the connection to the real apiserver breaks, through a loopback proxy that
stalls (half-open) or resets connections (support/fault_proxy.py).

Before the fix, a request on a stalled connection never returned (no read timeout: the sync's
thread and its object's lock were held for good), a reset escaped the sync as urllib3's error
(the object was retried only at its next resync, about 900 s later), and kopf's liveness
endpoint stayed green while no sync made progress.
"""

from __future__ import annotations

import gc
import json
import logging
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from support.api_controllers import seeds_example
from support.fault_proxy import RESET_LEAVES_SOCKETS_TO_GC, FaultProxy, collect_reset_sockets
from support.polling import eventually

from warmgate.api import parse_manifest
from warmgate.api.conditions import get_condition
from warmgate.devcluster.controlplane import ControlPlane, OperatorProcess
from warmgate.kube.cluster import ClusterError
from warmgate.kube.kube_cluster import KubeCluster
from warmgate.reconcile.planning.evaluate import evaluate
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.runtime.sync import Runtime, sync
from warmgate.settings import Settings

pytestmark = pytest.mark.integration
T = TypeVar("T")
# Short timeouts, so a test waits seconds where the defaults (5 s, 30 s) would wait longer.
TIMEOUTS = (2.0, 3.0)


@pytest.fixture(scope="module", autouse=True)
def sockets_closed_before_the_next_module() -> Iterator[None]:
    yield
    collect_reset_sockets()


@pytest.fixture
def proxied(control_plane: ControlPlane, proxy: FaultProxy, tmp_path: Path) -> Path:
    """A kubeconfig whose server is the proxy."""
    return proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")


@pytest.fixture
def connect(proxied: Path) -> Iterator[Callable[[], KubeCluster]]:
    """The adapter through the proxy, as the operator connects it; its pool closed after."""
    made: list[KubeCluster] = []

    def make() -> KubeCluster:
        made.append(KubeCluster.connect(2, TIMEOUTS, config_file=str(proxied)))
        return made[-1]

    yield make
    for cluster in made:
        cluster.api.close()
    # The sockets a reset left to the garbage collector are closed now, under this test's
    # warning filter, not in whichever test the collector happens to run next.
    gc.collect()


def bounded(call: Callable[[], T], seconds: float) -> tuple[T | BaseException, float]:
    """The call's result or exception and how long it took; fails the test (instead of
    hanging it) when it has not returned after ``seconds``."""
    found: list[T | BaseException] = []

    def run() -> None:
        try:
            found.append(call())
        except BaseException as exc:  # handed to the test
            found.append(exc)

    began = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert found, f"the call still waits after {seconds} s: no timeout"
    return found[0], time.monotonic() - began


def test_a_request_on_a_stalled_connection_fails_after_the_read_timeout(
    proxy: FaultProxy, connect: Callable[[], KubeCluster], namespace: str
) -> None:
    cluster = connect()
    assert cluster.read("Job", namespace, "absent") is None  # the proxy relays
    proxy.stall()
    error, took = bounded(lambda: cluster.read("Job", namespace, "absent"), 30)
    assert isinstance(error, ClusterError), error
    assert error.status is None
    assert error.transient  # retried with the backoff of a 5xx
    assert took < TIMEOUTS[1] + 2
    proxy.heal()  # new connections relay; the stalled one stays half-open for good
    assert cluster.read("Job", namespace, "absent") is None


@RESET_LEAVES_SOCKETS_TO_GC
def test_a_reset_connection_is_a_transient_cluster_error(
    proxy: FaultProxy, connect: Callable[[], KubeCluster], namespace: str
) -> None:
    cluster = connect()
    assert cluster.list_pods(namespace, "app=x") == []
    proxy.reset()
    for call in (
        lambda: cluster.list_pods(namespace, "app=x"),
        lambda: cluster.create(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "c", "namespace": namespace},
            }
        ),
    ):
        error, _ = bounded(call, 30)
        assert isinstance(error, ClusterError), error
        assert error.transient
    proxy.heal()
    assert cluster.list_pods(namespace, "app=x") == []


class Posted:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def post(self, type_: Any, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))


@RESET_LEAVES_SOCKETS_TO_GC
def test_a_sync_whose_connection_resets_keeps_the_state_and_retries_after_the_backoff(
    control_plane: ControlPlane, warmgate_crd: ControlPlane, proxy: FaultProxy,
    connect: Callable[[], KubeCluster], namespace: str,
) -> None:  # fmt: skip
    """The whole sync with the real adapter: the reset is a ClusterError the sync reports
    (Warmed Unknown, the error in its message) and retries after 2 s, not a crash."""
    control_plane.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(namespace, "reset")))
    got = control_plane.kubectl("get", "sdd", "-n", namespace, "reset", "-o", "json")
    sdd = parse_manifest(json.loads(got.stdout))
    cluster = connect()
    runtime = Runtime(Settings(), cluster, PlanningCache(evaluate))
    proxy.reset()
    outcome, _ = bounded(lambda: sync(sdd, runtime, Posted(), logging.getLogger("t")), 60)
    assert not isinstance(outcome, BaseException), outcome
    assert outcome.retry_after == 2.0  # the backoff's first step, not the 900 s resync
    warmed = get_condition(outcome.status.conditions, "Warmed")
    assert warmed is not None
    assert (warmed.status, warmed.reason) == ("Unknown", "WarmupPending")
    assert "retrying" in warmed.message


def _health(op: OperatorProcess) -> int:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{op.health_port}/healthz", timeout=5
        ) as found:
            return int(found.status)
    except urllib.error.HTTPError as failed:
        with failed:
            return int(failed.code)


def _job_names(cp: ControlPlane, ns: str) -> list[str]:
    return cp.kubectl("get", "jobs.batch", "-n", ns, "-o", "name").stdout.split()


def test_stalled_syncs_fail_the_liveness_probe_and_the_operator_recovers(
    *, control_plane: ControlPlane, warmgate_crd: ControlPlane, proxy: FaultProxy,
    proxied: Path, namespace: str, tmp_path: Path,
) -> None:  # fmt: skip
    env = {
        "WARMGATE_RESYNC_SECONDS": "1",
        "WARMGATE_API_READ_TIMEOUT": "8",
        "WARMGATE_STALL_SECONDS": "3",
        "WARMGATE_OPERATOR_IMAGE": "warmgate:test",
    }
    op = OperatorProcess(proxied, namespace, tmp_path / "operator.log", env=env).wait_alive()
    try:
        doc = json.dumps(seeds_example(namespace, "stalled"))
        control_plane.kubectl("apply", "-f", "-", stdin=doc)
        assert eventually(lambda: _job_names(control_plane, namespace), 60)
        assert _health(op) == 200
        proxy.stall()  # the next resync's requests are never answered
        assert eventually(lambda: _health(op) == 503, 30), "the probe stayed green"
        proxy.heal()  # the stalled requests stay stalled; new connections work
        for job in _job_names(control_plane, namespace):  # gone while the operator was stuck
            control_plane.kubectl("delete", "-n", namespace, job, "--wait=false")
        healed = time.monotonic()
        assert eventually(lambda: _health(op) == 200, 30)
        assert eventually(lambda: _job_names(control_plane, namespace), 60)
        print(f"the Job was back {time.monotonic() - healed:.1f} s after the heal")
    finally:
        op.stop()
    log = (tmp_path / "operator.log").read_text()
    assert "Liveness probe failed" in log
