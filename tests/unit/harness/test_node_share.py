"""The node lock of two runs sharing one node (tests/support/node_share.py): shared scenarios
overlap, an exclusive one runs alone, and a waiting exclusive one is not starved."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import node_share


@pytest.fixture
def shared_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(node_share.ROLE_ENV, node_share.GUEST)
    monkeypatch.setenv(node_share.SHARE_ENV, str(tmp_path))
    return tmp_path


def _hold(alone: bool, seconds: float, log: list[tuple[str, float]], name: str) -> threading.Thread:
    """A scenario in a thread: the lock, ``seconds`` of work, the release (flock locks belong to
    the open file, so two threads with their own open file conflict like two processes)."""

    def run() -> None:
        with node_share.node_lock(alone):
            log.append((f"{name} in", time.monotonic()))
            time.sleep(seconds)
            log.append((f"{name} out", time.monotonic()))

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _at(log: list[tuple[str, float]], what: str) -> float:
    return next(t for w, t in log if w == what)


def test_shared_scenarios_overlap(shared_node: Path) -> None:
    log: list[tuple[str, float]] = []
    threads = [_hold(False, 0.5, log, n) for n in ("a", "b")]
    for t in threads:
        t.join()
    assert _at(log, "b in") < _at(log, "a out")
    assert _at(log, "a in") < _at(log, "b out")


def test_an_alone_scenario_waits_for_shared_ones_and_new_shared_ones_wait_for_it(
    shared_node: Path,
) -> None:
    log: list[tuple[str, float]] = []
    first = _hold(False, 0.6, log, "shared1")
    time.sleep(0.1)
    alone = _hold(True, 0.3, log, "alone")
    time.sleep(0.1)
    late = _hold(False, 0.1, log, "shared2")  # arrives while the alone one waits: the turnstile
    for t in (first, alone, late):
        t.join()
    assert _at(log, "alone in") >= _at(log, "shared1 out")
    assert _at(log, "shared2 in") >= _at(log, "alone out")


def test_a_shared_module_takes_the_node_alone_for_a_while(shared_node: Path) -> None:
    """``NodeHold.alone``: the block waits for the shared module already running and keeps
    a newcomer out; the module shares the node again after it."""
    log: list[tuple[str, float]] = []

    def window() -> None:
        with node_share.node_lock(False) as hold:
            log.append(("window prepared", time.monotonic()))
            time.sleep(0.2)
            with hold.alone():
                log.append(("alone in", time.monotonic()))
                time.sleep(0.3)
                log.append(("alone out", time.monotonic()))
            time.sleep(0.4)  # what it checks after, beside the newcomer
            log.append(("window out", time.monotonic()))

    first = _hold(False, 0.6, log, "shared1")
    time.sleep(0.05)
    owner = threading.Thread(target=window)
    owner.start()
    time.sleep(0.35)  # the window waits for shared1 now
    late = _hold(False, 0.1, log, "shared2")
    for t in (first, owner, late):
        t.join()
    assert _at(log, "window prepared") < _at(log, "shared1 out")  # prepared beside it
    assert _at(log, "alone in") >= _at(log, "shared1 out")
    assert _at(log, "shared2 in") >= _at(log, "alone out")  # kept out while alone
    assert _at(log, "shared2 in") < _at(log, "window out")  # then shared again


def test_an_exclusive_hold_kept_passes_to_the_next_module_with_nobody_between(
    shared_node: Path,
) -> None:
    log: list[tuple[str, float]] = []

    def owner() -> None:
        with node_share.node_lock(True, keep=True):
            log.append(("first in", time.monotonic()))
            time.sleep(0.3)
        time.sleep(0.2)  # between two modules: a shared one that waits must not get in
        with node_share.node_lock(True):
            log.append(("second in", time.monotonic()))
            time.sleep(0.2)
            log.append(("second out", time.monotonic()))

    first = threading.Thread(target=owner)
    first.start()
    time.sleep(0.1)
    late = _hold(False, 0.1, log, "shared")
    for t in (first, late):
        t.join()
    assert _at(log, "shared in") >= _at(log, "second out")


def test_a_lone_run_takes_no_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(node_share.ROLE_ENV, raising=False)
    monkeypatch.setenv(node_share.SHARE_ENV, str(tmp_path))
    with node_share.node_lock(True), node_share.node_lock(False) as hold, hold.alone():
        pass  # each would deadlock if it locked
    assert not list(tmp_path.iterdir())


def test_the_guest_reads_the_owners_cluster(shared_node: Path) -> None:
    from warmgate.devcluster.images import Image, ImageSet

    images = ImageSet(*(Image(f"localhost/{n}:1", Path(f"/x/{n}.tar")) for n in ("p", "o", "e")))
    node_share.publish(
        node_share.cluster_doc(
            Path("/bin/kubectl"), Path("/k/config"), ["ctr", "-a"], images, Path("/cp/logs")
        )
    )
    doc = node_share.wait_for_cluster(timeout_s=1)
    assert node_share.images_of(doc) == images
    guest = node_share.guest_cluster(doc)
    assert (guest.kubectl_path, guest.kubeconfig, guest.ctr, guest.logs) == (
        Path("/bin/kubectl"),
        Path("/k/config"),
        ["ctr", "-a"],
        Path("/cp/logs"),
    )


def test_a_guest_without_an_owner_gives_up_with_the_reason(shared_node: Path) -> None:
    with pytest.raises(TimeoutError, match="never started a cluster"):
        node_share.wait_for_cluster(timeout_s=0.2)


def test_real_engines_never_meet(shared_node: Path) -> None:
    log: list[tuple[str, float]] = []

    def engines(name: str) -> threading.Thread:
        def run() -> None:
            with node_share.engines_lock():
                log.append((f"{name} in", time.monotonic()))
                time.sleep(0.3)
                log.append((f"{name} out", time.monotonic()))

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    first = engines("tier")
    time.sleep(0.05)
    second = engines("scenario l")
    for t in (first, second):
        t.join()
    assert _at(log, "scenario l in") >= _at(log, "tier out")


def test_the_guest_shares_take_every_scenario_once_and_balance_the_long_ones() -> None:
    modules = [*node_share.GUEST_SECONDS, "test_a_ready.py", "test_b_unwarmed.py"]
    shares = node_share.split_scenarios(modules, 2)
    assert sorted(m for share in shares for m in share) == sorted(modules)
    # the two longest never share a run
    longest = sorted(node_share.GUEST_SECONDS, key=node_share.GUEST_SECONDS.__getitem__)[-2:]
    assert [sum(m in share for m in longest) for share in shares] == [1, 1]

    def load(share: list[str]) -> float:
        seconds = node_share.GUEST_SECONDS
        return sum(seconds.get(m, node_share.OTHER_SCENARIO_S) for m in share)

    most = max(node_share.GUEST_SECONDS.values())
    assert abs(load(shares[0]) - load(shares[1])) <= most


def test_one_share_is_every_scenario() -> None:
    assert node_share.split_scenarios(["b.py", "a.py"], 1) == [["a.py", "b.py"]]


@pytest.mark.parametrize(("value", "part"), [("", None), ("1/2", (1, 2)), ("2/2", (2, 2))])
def test_the_guest_part_is_read_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, value: str, part: tuple[int, int] | None
) -> None:
    monkeypatch.setenv(node_share.PART_ENV, value)
    assert node_share.guest_part() == part


@pytest.mark.parametrize("value", ["3/2", "0/2", "x/2"])
def test_a_wrong_guest_part_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv(node_share.PART_ENV, value)
    with pytest.raises(ValueError, match="expected I/N"):
        node_share.guest_part()
