"""What `make test` provisions while the tests already run, and waiting for it.

`make test` makes the venv, then starts the tests at once and provisions the rest beside them
(hack/run-tests.sh: one `make` of the parts below, each part's name written into the folder
``$WARMGATE_PROVISIONED`` when it is made, and ``.exit`` with make's status when it ends). A test
that needs a part marks its module ``@pytest.mark.provisioned("PART", ...)``:

- the run moves the tests whose parts are not there yet behind the others (``defer``), so
  the unit tier does not stand still while promtool compiles;
- the code that finds the part (``monitoring.tool``, ``gitops_health.helper``, the real-engine
  tier, scenario l) calls ``wait`` first, which returns when the part is made and fails the
  test, naming the log, when its make failed.

Without ``$WARMGATE_PROVISIONED`` (a plain `pytest`, `make unit`, ...) both do nothing: the parts
are there or not, as before.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Final

import pytest

ENV: Final = "WARMGATE_PROVISIONED"
# make's status, written when the provisioning ended (hack/run-tests.sh)
EXIT: Final = ".exit"
# the provisioning's output (its step lines, lint's findings), beside the pytest logs
LOG_ENV: Final = "WARMGATE_PROVISION_LOG"
# the Makefile targets a test may wait for (hack/run-tests.sh's TEST_PARTS are these and lint)
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
MARK: Final = "provisioned"
POLL_S: Final = 2.0


def folder() -> Path | None:
    """Where the made parts are named, when the provisioning runs beside the tests."""
    value = os.environ.get(ENV)
    return Path(value) if value else None


def made(part: str) -> bool:
    """Whether ``part`` is there to use (always, without a provisioning beside the tests)."""
    where = folder()
    return where is None or (where / part).exists()


def wait(part: str, timeout_s: float = 3600) -> None:
    """Return once ``part`` is made; fail the test when its provisioning failed or timed out."""
    if part not in PARTS:
        raise ValueError(f"unknown part {part!r}: one of {sorted(PARTS)}")
    where = folder()
    if where is None or (where / part).exists():
        return
    began = time.monotonic()
    _say(f"waiting for `make {part}`, which runs beside the tests")
    while not (where / part).exists():
        if (where / EXIT).exists() and not (where / part).exists():
            log = os.environ.get(LOG_ENV, "the provisioning's output")
            pytest.fail(
                f"`make {part}` was not made: the provisioning beside the tests ended (make exit "
                f"{(where / EXIT).read_text().strip()}): see {log}"
            )
        if time.monotonic() - began > timeout_s:
            pytest.fail(f"`make {part}` was not made within {timeout_s:.0f} s")
        time.sleep(POLL_S)
    _say(f"`make {part}` is made: waited {time.monotonic() - began:.0f} s")


def parts_of(item: pytest.Item) -> set[str]:
    """The parts an item's marks name."""
    names: set[str] = set()
    for mark in item.iter_markers(MARK):
        for part in mark.args:
            if part not in PARTS:
                raise pytest.UsageError(f"{item.nodeid}: unknown part {part!r} in @{MARK}")
            names.add(part)
    return names


def defer(items: list[pytest.Item]) -> int:
    """Move the items whose parts are not made yet behind the others, in their order (a stable
    sort: a module stays together). Returns how many moved."""
    if folder() is None:
        return 0
    waiting = {id(item) for item in items if not all(made(p) for p in parts_of(item))}
    items.sort(key=lambda item: id(item) in waiting)
    return len(waiting)


def _say(message: str) -> None:
    """A line on the run's real stderr (pytest captures the test's own)."""
    print(f"provisioned: {message}", file=sys.__stderr__, flush=True)
