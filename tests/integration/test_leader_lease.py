"""Issue 23 item 9: leader election on a real coordination.k8s.io/v1 Lease of the real apiserver
(runtime/leader.py over kube/lease_api.py): one holder at a time, renewals, a release
taken at once by a standby that watches the Lease, and a standby that outlives a broken
connection (kopf's peering check ended for good at the first one)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.api_controllers import get
from support.fault_proxy import RESET_LEAVES_SOCKETS_TO_GC, FaultProxy, collect_reset_sockets

from warmgate.devcluster.controlplane import ControlPlane
from warmgate.kube.lease_api import KubeLeases
from warmgate.runtime.leader import Elector
from warmgate.settings import LeaseSettings

pytestmark = pytest.mark.integration
TIMINGS = LeaseSettings("wg-test", None, duration=4.0, renew_deadline=3.0, retry_period=1.0)


@pytest.fixture(scope="module", autouse=True)
def sockets_closed_before_the_next_module() -> Iterator[None]:
    yield
    collect_reset_sockets()


@pytest.fixture(autouse=True)
def _close_clients() -> Iterator[None]:
    yield
    for api in MADE:
        api.api.close()
    MADE.clear()


MADE: list[KubeLeases] = []


def elector(kubeconfig: Path, namespace: str, holder: str) -> Elector:
    api = KubeLeases.connect(namespace, TIMINGS, (2.0, 2.0), config_file=str(kubeconfig))
    MADE.append(api)
    return Elector(api, holder, TIMINGS)


def lease(cp: ControlPlane, namespace: str) -> dict[str, object]:
    return dict(get(cp, "lease", "-n", namespace, TIMINGS.name)["spec"])


def test_one_holder_renewals_and_a_release_taken_at_once(
    control_plane: ControlPlane, namespace: str
) -> None:
    first = elector(control_plane.kubeconfig, namespace, "first")
    second = elector(control_plane.kubeconfig, namespace, "second")
    assert first.try_acquire_or_renew()  # creates the Lease
    spec = lease(control_plane, namespace)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("first", 4)
    assert not second.try_acquire_or_renew()
    time.sleep(1.0)
    assert first.try_acquire_or_renew()  # a renewal
    renewed = lease(control_plane, namespace)
    assert renewed["renewTime"] != spec["renewTime"]
    assert renewed["acquireTime"] == spec["acquireTime"]

    took: list[float] = []

    def stand_by() -> None:
        began = time.monotonic()
        assert second.acquire(threading.Event())
        took.append(time.monotonic() - began)

    standby = threading.Thread(target=stand_by, daemon=True)
    standby.start()
    time.sleep(1.5)  # the standby watches; the holder renews meanwhile
    assert first.try_acquire_or_renew()
    released = time.monotonic()
    assert first.release()
    standby.join(10)
    assert took, "the standby never took the released Lease"
    handover = time.monotonic() - released
    assert handover < TIMINGS.retry_period  # the watch saw the release: no retry period waited
    spec = lease(control_plane, namespace)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("second", 1)
    print(f"a released Lease was taken after {handover:.2f} s")


@RESET_LEAVES_SOCKETS_TO_GC
def test_a_standby_outlives_broken_connections_and_takes_over_an_expired_lease(
    control_plane: ControlPlane, namespace: str, proxy: FaultProxy, tmp_path: Path
) -> None:
    """The standby's connection resets, then stalls, then heals; the leader stops renewing
    (it died): the standby still takes over once the record is unchanged for 4 s."""
    leader = elector(control_plane.kubeconfig, namespace, "leader")
    assert leader.try_acquire_or_renew()
    proxied = proxy.kubeconfig(control_plane.kubeconfig, tmp_path / "kubeconfig")
    standby = elector(proxied, namespace, "standby")
    stop, won = threading.Event(), threading.Event()

    def stand_by() -> None:
        if standby.acquire(stop):
            won.set()

    thread = threading.Thread(target=stand_by, daemon=True)
    proxy.reset()
    thread.start()
    time.sleep(3)  # every attempt fails: reset
    proxy.stall()
    time.sleep(3)  # every attempt hangs until its timeout
    assert not won.is_set()
    proxy.heal()
    began = time.monotonic()  # the leader no longer renews from here on
    assert won.wait(30), "the standby gave up after the connection errors"
    took = time.monotonic() - began
    stop.set()
    assert TIMINGS.duration <= took < TIMINGS.duration + 3 * TIMINGS.retry_period + 4
    assert lease(control_plane, namespace)["holderIdentity"] == "standby"
