"""The e2e tier: a real single-node cluster (warmgate/devcluster), the operator installed with
its Helm chart, and the stand-in engine image. Skipped with the reason where the node cannot
start (no root, no containerd); under CI=true that fails the run instead. ``make test`` runs
the scenarios in two runs that share the node (tests/support/node_share.py)."""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator

import pytest
from e2e_support import E2ECluster
from support import node_share

from warmgate.devcluster import operator
from warmgate.devcluster.assets import node_assets, unavailable_reason
from warmgate.devcluster.cluster import DevCluster
from warmgate.devcluster.images import Builder

E2E_DIR = os.path.dirname(__file__)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is `e2e`, with room for a cold image build in its timeout (a module
    that needs more says so with its own timeout marker). The owner run (tests/support/
    node_share.py) runs the modules marked ``node_alone`` last, one after the other with the
    node held between them: by then the guest's scenarios are ending, so fewer wait for them
    or behind them (the modules that share the node, scenario l's real engines first, overlap
    the guest's)."""
    for item in items:
        if str(item.fspath).startswith(E2E_DIR):
            item.add_marker(pytest.mark.e2e)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(900))
    if node_share.role() == node_share.OWNER:
        items.sort(key=lambda item: item.get_closest_marker("node_alone") is not None)


class GuestShare:
    """A guest run with a share (tests/support/node_share.py, ``PART_ENV``) keeps the scenario
    modules of its share. A plugin of its own: it must run after the marker selection (so the
    shares split what the run selected), and the module's hook above before it (it adds the
    ``e2e`` marker the selection reads)."""

    def __init__(self, index: int, parts: int) -> None:
        self.index, self.parts = index, parts

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        def module(item: pytest.Item) -> str:
            return os.path.basename(str(item.fspath))

        shares = node_share.split_scenarios(sorted({module(i) for i in items}), self.parts)
        mine = set(shares[self.index - 1])
        dropped = [item for item in items if module(item) not in mine]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = [item for item in items if module(item) in mine]


def pytest_configure(config: pytest.Config) -> None:
    """A guest run holds its session lock from the start (the owner's cluster outlives it), and
    keeps its share of the scenarios when it has one."""
    if node_share.role() == node_share.GUEST:
        stack = contextlib.ExitStack()
        stack.enter_context(node_share.guest_session())
        config.add_cleanup(stack.close)
        part = node_share.guest_part()
        if part is not None:
            config.pluginmanager.register(GuestShare(*part), "warmgate-guest-share")


def _progress(config: pytest.Config) -> Callable[[str], None]:
    """Progress lines on the terminal even while pytest captures output (builds are long)."""
    capture = config.pluginmanager.getplugin("capturemanager")
    terminal = config.pluginmanager.getplugin("terminalreporter")

    def say(message: str) -> None:
        if capture is None or terminal is None:
            return
        with capture.global_and_fixture_disabled():
            terminal.write_line(f"dev cluster: {message}")

    return say


@pytest.fixture(scope="session")
def progress(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Writes a progress line on the terminal (image builds, imports)."""
    return _progress(request.config)


def _no_node(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the e2e tier needs the local node under CI: {reason}")
    pytest.skip(f"no local node: {reason}")


@pytest.fixture(scope="session")
def e2e(request: pytest.FixtureRequest) -> Iterator[E2ECluster]:
    """The cluster with the operator running; skipped (or failed under CI) where it cannot run.
    A guest run uses the owner run's cluster (tests/support/node_share.py)."""
    role = node_share.role()
    if role == node_share.GUEST:
        doc = node_share.wait_for_cluster()
        if "unavailable" in doc:
            _no_node(doc["unavailable"])
        yield E2ECluster(node_share.guest_cluster(doc), node_share.images_of(doc))  # type: ignore[arg-type]
        return
    reason = unavailable_reason()
    if reason is not None:
        if role == node_share.OWNER:
            node_share.publish({"unavailable": reason})
        _no_node(reason)
    say = _progress(request.config)
    try:
        images = Builder(say).ensure()
        cluster = DevCluster(node_assets(), images, say).start()
    except BaseException as err:
        if role == node_share.OWNER:
            node_share.publish({"unavailable": f"the owner run could not start it: {err}"})
        raise
    try:
        operator.install(cluster.assets, cluster.kubeconfig, images.operator.ref)
        say(f"installed the operator chart with image {images.operator.ref}")
        if role == node_share.OWNER:
            assert cluster.cp is not None
            node_share.publish(
                node_share.cluster_doc(
                    cluster.cp.assets / "kubectl",
                    cluster.kubeconfig,
                    cluster.ctr,
                    images,
                    cluster.cp.workdir,
                )
            )
        yield E2ECluster(cluster, images)
        if role == node_share.OWNER:
            say("waiting for the guest run's scenarios to end before the cluster stops")
            with node_share.owner_waits_for_guest():
                pass
    finally:
        cluster.stop()


@pytest.fixture(scope="module", autouse=True)
def node_lock(request: pytest.FixtureRequest) -> Iterator[node_share.NodeHold]:
    """The node for the module's whole run: exclusive for a module marked ``node_alone``,
    shared otherwise (only when two runs share it). A module that disrupts the node only for a
    while takes it alone for that while: ``with node_lock.alone(): ...``."""
    alone = request.node.get_closest_marker("node_alone") is not None
    with node_share.node_lock(alone, keep=_next_module_alone(request)) as hold:
        yield hold


def _next_module_alone(request: pytest.FixtureRequest) -> bool:
    """Whether the run's next module after this one is marked ``node_alone``."""
    items = request.session.items
    mine = [i for i, item in enumerate(items) if getattr(item, "module", None) is request.module]
    after = mine[-1] + 1 if mine else len(items)
    return after < len(items) and items[after].get_closest_marker("node_alone") is not None


@pytest.fixture(scope="module")
def namespace(e2e: E2ECluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace per module, deleted (for real: the namespace controller runs) afterwards."""
    stem = re.sub(r"[^a-z0-9-]", "-", request.module.__name__.split(".")[-1].lower())[:40]
    name = f"{stem.strip('-')}-{uuid.uuid4().hex[:6]}"
    e2e.kubectl("create", "namespace", name)
    yield name
    e2e.kubectl("delete", "namespace", name, "--wait=false", check=False)
