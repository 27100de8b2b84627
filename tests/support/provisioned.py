"""What `make test` provisions while the tests already run, and waiting for it.

`make test` makes the venv, then starts the tests at once and provisions the rest beside them
(hack/run-tests.sh: one `make` of the parts below; each target's recipe ends by writing its
name into the folder ``$WARMGATE_PROVISIONED``, the Makefile's MARK, and ``.exit`` holds make's
status when it ends). A test
that needs a part marks its module ``@pytest.mark.provisioned("PART", ...)``:

- the run moves the tests whose parts are not there yet behind the others (``defer``), so
  the unit tier does not stand still while promtool compiles;
- the code that finds the part (``monitoring.tool``, ``gitops_health.helper``, the control
  plane's fixture, the real-engine tier, scenario l) calls ``wait`` first, which returns when
  the part is made and fails the test, naming the log, when its make failed.

Without ``$WARMGATE_PROVISIONED`` (a plain `pytest`, `make unit`, ...) both do nothing: the parts
are there or not, as before.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import pytest

ENV: Final = "WARMGATE_PROVISIONED"
# make's status, written when the provisioning ended (hack/run-tests.sh)
EXIT: Final = ".exit"
# the provisioning's output (its step lines, lint's findings), beside the pytest logs
LOG_ENV: Final = "WARMGATE_PROVISION_LOG"
# the Makefile targets a test may wait for (the Makefile's TEST_PARTS and TEST_TOOLS are these
# and lint)
PARTS: Final = frozenset(
    {
        "assets",
        "images",
        "vllm-engine",
        "engine-image",
        "gitops-health",
        "kube-state-metrics",
        "promtool",
    }
)
# `assets` is made once these are: each writes its name in its own job, `assets` itself in a job
# that may wait for a free slot behind the long builds (the Makefile's MARK)
ASSETS_PARTS: Final = ("etcd", "kubectl", "kube", "helm")
MARK: Final = "provisioned"
POLL_S: Final = 2.0


def folder() -> Path | None:
    """Where the made parts are named, when the provisioning runs beside the tests."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def made(part: str) -> bool:
    """Whether ``part`` is there to use (always, without a provisioning beside the tests)."""
    where = folder()
    if where is None or (where / part).exists():
        return True
    return part == "assets" and all((where / p).exists() for p in ASSETS_PARTS)


def wait(part: str, timeout_s: float = 3600) -> None:
    """Return once ``part`` is made; fail the test when its provisioning failed or timed out."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}: one of {sorted(PARTS)}")
    where = folder()
    if where is None or made(part):
        return
    began = time.monotonic()
    _say(f"waiting for `make {part}`, which runs beside the tests")
    while not made(part):
        if (where / EXIT).exists() and not made(part):
            log = os.environ.get(LOG_ENV, "the provisioning's output")
            pytest.fail(
                f"`make {part}` was not made: the provisioning beside the tests ended (make exit "
                f"{(where / EXIT).read_text().strip()}): see {log}"
            )
        if time.monotonic() - began > timeout_s:
            pytest.fail(f"`make {part}` was not made within {timeout_s:.0f} s")
        time.sleep(POLL_S)
    _say(f"`make {part}` is made: waited {time.monotonic() - began:.0f} s")


def settle(item: pytest.Item, timeout_s: float = 3600) -> float:
    """Wait until the item's marked parts are made or the provisioning ended, whichever first;
    returns the seconds waited. Never fails: the test's own ``wait`` says what went wrong. Run
    before the test's timeout starts (tests/conftest.py), so a wait for a long build does not
    eat a test's 300 s."""
    where = folder()
    parts = parts_of(item)
    if where is None or all(made(p) for p in parts):
        return 0.0
    began = time.monotonic()
    _say(f"{item.nodeid} waits for `make {' '.join(sorted(parts))}`, which runs beside the tests")
    while not all(made(p) for p in parts) and not (where / EXIT).exists():
        if time.monotonic() - began > timeout_s:
            break
        time.sleep(POLL_S)
    return time.monotonic() - began


def parts_of(item: pytest.Item) -> set[str]:
    """The parts an item's marks name."""
    names: set[str] = set()
    for mark in item.iter_markers(MARK):
        for part in mark.args:
            if part not in PARTS:
                raise pytest.UsageError(f"{item.nodeid}: unknown part {part!r} in @{MARK}")
            names.add(part)
    return names


def unmade(items: list[pytest.Item]) -> dict[str, set[str]]:
    """Each item (by node id) that needs parts not made yet, with those parts."""
    if folder() is None:
        return {}
    waiting = {item.nodeid: {p for p in parts_of(item) if not made(p)} for item in items}
    return {nodeid: parts for nodeid, parts in waiting.items() if parts}


def defer(items: list[pytest.Item]) -> int:
    """Move the items whose parts are not made yet behind the others, in their order (a stable
    sort: a module stays together). Returns how many moved."""
    waiting = unmade(items)
    items.sort(key=lambda item: item.nodeid in waiting)
    return len(waiting)


# The module is a pytest plugin too (registered by tests/conftest.py).


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under `make test`, the tests whose parts are still being made run after the others. First,
    so the e2e owner's order (node_alone last) is made from this one."""
    defer(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Say which of the run's tests (once the run's selection is made) wait for a part."""
    waiting = unmade(session.items)
    terminal = session.config.pluginmanager.getplugin("terminalreporter")
    if waiting and terminal is not None:
        parts = ", ".join(sorted(set().union(*waiting.values())))
        terminal.write_line(
            f"provisioned: {len(waiting)} tests need parts still being made ({parts}): last"
        )


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    """A test marked ``provisioned`` waits for its parts outside its timeout (pytest-timeout's
    timer starts inside this wrapper): a build beside the tests may take longer than 300 s."""
    settle(item)
    yield


def _say(message: str) -> None:
    """A line on the run's real stderr (pytest captures the test's own)."""
    print(f"provisioned: {message}", file=sys.__stderr__, flush=True)
