"""One node, two pytest runs: the e2e scenarios that only need their own namespace run beside
the others, and those that need the node alone wait for it (docs/testing.md, "The node shared").

``make test`` (hack/run-tests.sh) starts three runs beside the rest with ``WARMGATE_E2E_ROLE``:

- ``owner`` starts the cluster and installs the operator as a lone run does, writes where it is
  (``cluster.json`` in ``WARMGATE_E2E_SHARE``), runs the scenarios marked ``node_alone`` (they
  stop the kubelet, freeze the API server, restart or uninstall the operator, read every
  object's metrics) or ``node_owner`` (they need the owner's processes or files); it stops the
  cluster only once the guest has ended;
- ``guest`` waits for ``cluster.json``, then runs every other scenario against that cluster
  with kubectl; ``make test`` runs two guests, each with its share of them (``PART_ENV``);
- ``engines`` runs the real-engine tests, which need no node; they and scenario l take the
  engines lock, so their real engines never meet in the machine's memory.

Each scenario module holds the node lock for its whole run: shared by default, exclusive when
it is marked ``node_alone``. A turnstile makes a waiting exclusive module block new shared ones,
so neither run starves. With no role (``make e2e``, ``pytest tests/e2e``) one run does it all,
one scenario after the other, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from warmgate.devcluster.images import Image, ImageSet

ROLE_ENV = "WARMGATE_E2E_ROLE"
SHARE_ENV = "WARMGATE_E2E_SHARE"
OWNER, GUEST, ENGINES = "owner", "guest", "engines"
CLUSTER_FILE = "cluster.json"
# How long the guest waits for the owner's cluster: the owner may still build images.
CLUSTER_WAIT_S = 1800.0


def role() -> str | None:
    """``owner``, ``guest`` or None (a lone run)."""
    value = os.environ.get(ROLE_ENV) or None
    if value not in (None, OWNER, GUEST, ENGINES):
        raise ValueError(f"{ROLE_ENV}={value!r}: expected {OWNER!r}, {GUEST!r} or {ENGINES!r}")
    return value


# Which share of the guest's scenarios a guest run takes ("1/2", "2/2"): `make test` runs two
# guests, since the scenarios mostly wait on the node and one after the other took 18 to 20 min.
PART_ENV = "WARMGATE_E2E_GUEST_PART"
# Each guest scenario's seconds in a full `make test` (2026-12-05, the longest; the others about
# 30 s), only to balance the guest runs: the longest first, each to the run with less so far.
GUEST_SECONDS = {
    "test_u_alerts_fired.py": 310.0,
    "test_s_children_deleted_by_hand.py": 225.0,
    "test_t_edit_user.py": 134.0,
    "test_n_namespace_intruder.py": 91.0,
    "test_g_unschedulable.py": 81.0,
    "test_d_warmup_pod_deleted.py": 57.0,
}
OTHER_SCENARIO_S = 30.0


def guest_part() -> tuple[int, int] | None:
    """This guest run's share (``(1, 2)`` for "1/2"), or None: every scenario."""
    value = os.environ.get(PART_ENV)
    if not value:
        return None
    index, _, count = value.partition("/")
    if not (index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise ValueError(f"{PART_ENV}={value!r}: expected I/N with 1 <= I <= N")
    return int(index), int(count)


def split_scenarios(modules: list[str], parts: int) -> list[list[str]]:
    """The scenario modules (file names) in ``parts`` shares of about equal time: the longest
    first, each to the share with the least time so far (the first on a tie)."""
    shares: list[list[str]] = [[] for _ in range(parts)]
    loads = [0.0] * parts
    for module in sorted(modules, key=lambda m: (-GUEST_SECONDS.get(m, OTHER_SCENARIO_S), m)):
        least = loads.index(min(loads))
        shares[least].append(module)
        loads[least] += GUEST_SECONDS.get(module, OTHER_SCENARIO_S)
    return [sorted(share) for share in shares]


def share_dir() -> Path:
    folder = os.environ.get(SHARE_ENV)
    if not folder:
        raise ValueError(f"{ROLE_ENV} is set but {SHARE_ENV} names no folder")
    return Path(folder)


@contextlib.contextmanager
def _flock(path: Path, mode: int) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


class NodeHold:
    """A scenario module's hold on the node (``node_lock``). A module that holds it shared and
    disrupts the node for a while (a kubelet stop, a frozen API server) takes it alone for just
    that while (``alone``): what it prepares before and checks after overlaps the guest's
    scenarios, and only the disruption waits for them."""

    def __init__(self, fd: int | None, turnstile: Path | None) -> None:
        self._fd, self._turnstile = fd, turnstile

    @contextlib.contextmanager
    def alone(self) -> Iterator[None]:
        """The node alone for the block, shared again after it; a no-op in a lone run or for a
        hold that is already exclusive. The way in is the turnstile, as for a module marked
        ``node_alone``: modules already running end first, new ones wait."""
        if self._fd is None or self._turnstile is None:
            yield
            return
        with _flock(self._turnstile, fcntl.LOCK_EX):
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # converts the shared lock
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_SH)


# An exclusive hold a module marked node_alone handed to the next one of its run (``keep``).
_handed: list[int] = []


@contextlib.contextmanager
def node_lock(alone: bool, keep: bool = False) -> Iterator[NodeHold]:
    """The node for one scenario module: exclusive when ``alone``, else shared (the hold can
    be made exclusive for a while: ``NodeHold.alone``). A no-op in a lone run. The turnstile is
    taken exclusively on the way in by everyone and held while an exclusive module waits, so
    shared modules queue behind a waiting exclusive one. ``keep``: an exclusive hold passes to
    the run's next module, also exclusive, without letting the other run's modules in between
    (each would make the next wait for one of them to end)."""
    if role() is None:
        yield NodeHold(None, None)
        return
    folder = share_dir()
    folder.mkdir(parents=True, exist_ok=True)
    if alone and _handed:
        fd = _handed.pop()
    else:
        fd = os.open(folder / "node.lock", os.O_RDWR | os.O_CREAT, 0o644)
        with _flock(folder / "turnstile.lock", fcntl.LOCK_EX):
            fcntl.flock(fd, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
    handed = False
    try:
        yield NodeHold(None if alone else fd, folder / "turnstile.lock")
        if alone and keep:
            _handed.append(fd)
            handed = True
    finally:
        if not handed:
            os.close(fd)  # closing the file releases the lock


@contextlib.contextmanager
def engines_lock() -> Iterator[None]:
    """The machine's memory for real vLLM engines, held by a module that starts them (3 to 4.5
    GB each): the real-engine run's modules and scenario l, whose engines run on the node, never
    meet. A no-op in a lone run (one run never starts two such modules at once).

    Exclusive, not a budget of engines: the memory would fit a real-engine module's engines
    beside scenario l's, but they take turns. Tried on 2026-12-05 with slots for four engines,
    l's ngram object took 825 s to Ready instead of 256 s, since the two CPU-bound runs shared
    two cores, and l is on the owner's critical path while the real-engine run has minutes to
    spare."""
    if role() is None:
        yield
        return
    with _flock(share_dir() / "engines.lock", fcntl.LOCK_EX):
        yield


def publish(doc: dict[str, Any]) -> None:
    """The owner says where the cluster is (or why there is none), atomically."""
    folder = share_dir()
    tmp = folder / f".{CLUSTER_FILE}.partial"
    tmp.write_text(json.dumps(doc), encoding="utf-8")
    tmp.rename(folder / CLUSTER_FILE)


def cluster_doc(
    kubectl: Path, kubeconfig: Path, ctr: list[str], images: ImageSet, logs: Path
) -> dict[str, Any]:
    return {
        "kubectl": str(kubectl),
        "kubeconfig": str(kubeconfig),
        "ctr": ctr,
        "logs": str(logs),
        "images": {name: [i.ref, str(i.archive)] for name, i in _images(images).items()},
    }


def _images(images: ImageSet) -> dict[str, Image]:
    return {"pause": images.pause, "operator": images.operator, "engine": images.engine}


def wait_for_cluster(timeout_s: float = CLUSTER_WAIT_S) -> dict[str, Any]:
    """The owner's ``cluster.json``; an owner that could not start one says why in it."""
    path = share_dir() / CLUSTER_FILE
    deadline = time.monotonic() + timeout_s
    while not path.is_file():
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"no {path} after {timeout_s:.0f} s: the owner run never started a cluster"
            )
        time.sleep(1)
    doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return doc


def images_of(doc: dict[str, Any]) -> ImageSet:
    got = {name: Image(ref, Path(archive)) for name, (ref, archive) in doc["images"].items()}
    return ImageSet(pause=got["pause"], operator=got["operator"], engine=got["engine"])


@dataclass
class GuestCluster:
    """The owner's cluster as the guest reaches it: kubectl with its kubeconfig, and the folder
    of its control plane's logs (the kube-controller-manager's, read by scenario n)."""

    kubectl_path: Path
    kubeconfig: Path
    ctr: list[str]
    logs: Path

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.kubectl_path), f"--kubeconfig={self.kubeconfig}", *args]
        return subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=check)


def guest_cluster(doc: dict[str, Any]) -> GuestCluster:
    return GuestCluster(
        Path(doc["kubectl"]), Path(doc["kubeconfig"]), list(doc["ctr"]), Path(doc["logs"])
    )


@contextlib.contextmanager
def guest_session() -> Iterator[None]:
    """Held by the guest for its whole run: the owner stops the cluster only after it."""
    with _flock(share_dir() / "guest.lock", fcntl.LOCK_SH):
        yield


@contextlib.contextmanager
def owner_waits_for_guest() -> Iterator[None]:
    """The owner's teardown: wait until no guest holds its session lock."""
    with _flock(share_dir() / "guest.lock", fcntl.LOCK_EX):
        yield
