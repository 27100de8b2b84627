"""Waiting for what `make test` provisions beside the tests (tests/support/provisioned.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support import provisioned
from support.paths import REPO_ROOT


@pytest.fixture
def parts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A provisioning beside the tests that has made nothing yet."""
    monkeypatch.setenv(provisioned.ENV, str(tmp_path))
    monkeypatch.setenv(provisioned.LOG_ENV, "/logs/provision.log")
    monkeypatch.setattr(provisioned, "POLL_S", 0.01)
    return tmp_path


def test_without_a_provisioning_beside_the_tests_every_part_is_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(provisioned.ENV, raising=False)
    assert provisioned.made("promtool")
    provisioned.wait("promtool", timeout_s=0)


def test_a_made_part_is_not_waited_for(parts: Path) -> None:
    (parts / "gitops-health").touch()
    assert provisioned.made("gitops-health")
    provisioned.wait("gitops-health", timeout_s=0)


def test_the_wait_ends_when_the_part_is_made(parts: Path) -> None:
    assert not provisioned.made("vllm-engine")
    timer = threading.Timer(0.2, (parts / "vllm-engine").touch)
    timer.start()
    try:
        provisioned.wait("vllm-engine", timeout_s=30)
    finally:
        timer.cancel()
    assert provisioned.made("vllm-engine")


def test_assets_are_made_once_their_four_parts_are(parts: Path) -> None:
    """The Makefile's `assets` writes its own name in a job that may wait behind long builds."""
    for name in ("etcd", "kubectl", "kube"):
        (parts / name).touch()
    assert not provisioned.made("assets")
    (parts / "helm").touch()
    assert provisioned.made("assets")
    provisioned.wait("assets", timeout_s=0)


def test_assets_made_by_their_own_target_alone_are_made(parts: Path) -> None:
    """With KUBEBUILDER_ASSETS, `assets` has no parts to make."""
    (parts / "assets").touch()
    assert provisioned.made("assets")


def test_a_part_whose_make_failed_fails_the_test_and_names_the_log(parts: Path) -> None:
    (parts / "assets").touch()
    (parts / provisioned.EXIT).write_text("2\n")
    with pytest.raises(
        pytest.fail.Exception, match=r"`make promtool` was not made.*exit 2.*provision\.log"
    ):
        provisioned.wait("promtool")


def test_a_part_never_made_fails_after_the_timeout(parts: Path) -> None:
    with pytest.raises(pytest.fail.Exception, match="not made within"):
        provisioned.wait("engine-image", timeout_s=0.05)


def test_an_unknown_part_is_refused(parts: Path) -> None:
    with pytest.raises(ValueError, match="unknown part"):
        provisioned.wait("prometheus")


@dataclass
class _Item:
    """What `defer` reads of a pytest item."""

    nodeid: str
    parts: tuple[str, ...] = ()

    def iter_markers(self, name: str) -> list[Any]:
        return (
            [pytest.mark.provisioned(*self.parts).mark]
            if self.parts and name == "provisioned"
            else []
        )


def test_the_tests_whose_parts_are_not_made_run_last_in_their_order(parts: Path) -> None:
    (parts / "gitops-health").touch()
    items = [
        _Item("a"),
        _Item("b", ("promtool",)),
        _Item("c", ("gitops-health",)),
        _Item("d", ("promtool", "gitops-health")),
        _Item("e"),
        _Item("f", ("kube-state-metrics",)),
    ]
    assert provisioned.defer(items) == 3  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["a", "c", "e", "b", "d", "f"]
    assert provisioned.unmade(items) == {  # type: ignore[arg-type]
        "b": {"promtool"},
        "d": {"promtool"},
        "f": {"kube-state-metrics"},
    }


def test_nothing_moves_without_a_provisioning_beside_the_tests(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(provisioned.ENV, raising=False)
    items = [_Item("b", ("promtool",)), _Item("a")]
    assert provisioned.defer(items) == 0  # type: ignore[arg-type]
    assert [i.nodeid for i in items] == ["b", "a"]


def test_a_mark_that_names_an_unknown_part_is_a_usage_error(parts: Path) -> None:
    with pytest.raises(pytest.UsageError, match="unknown part 'promethues'"):
        provisioned.defer([_Item("x", ("promethues",))])  # type: ignore[list-item]


def test_settle_returns_once_the_parts_are_made_or_the_provisioning_ended(parts: Path) -> None:
    item = _Item("x", ("promtool",))
    timer = threading.Timer(0.2, (parts / "promtool").touch)
    timer.start()
    try:
        assert provisioned.settle(item) > 0.1  # type: ignore[arg-type]
    finally:
        timer.cancel()
    late = _Item("y", ("kube-state-metrics",))
    (parts / provisioned.EXIT).write_text("2\n")
    provisioned.settle(late)  # type: ignore[arg-type]  # returns without failing
    assert provisioned.settle(_Item("z")) == 0.0  # type: ignore[arg-type]


_TIMED = """
import pytest
from support import provisioned

@pytest.mark.timeout(1)
@pytest.mark.provisioned("promtool")
def test_it():
    provisioned.wait("promtool")
"""


@pytest.mark.parametrize("plugin", [True, False])
def test_the_wait_for_a_marked_part_is_outside_the_test_s_timeout(
    tmp_path: Path, plugin: bool
) -> None:
    """A part made after 3 s: a test with a 1 s timeout passes when the plugin waited for it
    before the timeout started, and fails without the plugin (the control)."""
    made = tmp_path / "made"
    made.mkdir()
    (tmp_path / "test_timed.py").write_text(_TIMED)
    env = {
        **os.environ,
        provisioned.ENV: str(made),
        "PYTHONPATH": str(REPO_ROOT / "tests"),
    }
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", os.devnull]
    argv += ["--rootdir", str(tmp_path), "-W", "ignore::pytest.PytestUnknownMarkWarning"]
    if plugin:
        argv += ["-p", "support.provisioned"]
    timer = threading.Timer(3, (made / "promtool").touch)
    timer.start()
    try:
        done = subprocess.run(
            [*argv, str(tmp_path / "test_timed.py")],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        timer.cancel()
    assert (done.returncode == 0) is plugin, done.stdout + done.stderr
    if not plugin:
        assert "Timeout" in done.stdout, done.stdout
