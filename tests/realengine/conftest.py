"""The real-engine tier: every test here runs the real vLLM CPU engine (tests/realengine/engine.py).

Without the engine installed the tests skip with the command that installs it; under CI=true
they fail instead. The models are made once per session (models.py, under the engine's Python);
servers are module-scoped fixtures of the modules that need them, at most two alive at once
(each takes 3 to 4.5 GB).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from realengine import engine, runs, tiny

# Each real-engine test's time goes to this file when set (docs/testing.md's figures).
TIMES = os.environ.get("WARMGATE_REALENGINE_TIMES")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of this folder ``realengine`` (and ``slow``)."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.realengine)
            # on the module too: its engines outlive each test (the engines lock, tests/conftest.py)
            module = item.getparent(pytest.Module)
            if module is not None and module.get_closest_marker("realengine") is None:
                module.add_marker(pytest.mark.realengine)
            item.add_marker(pytest.mark.slow)
            # an engine starts in 35 s to 5 min on a loaded 2-core machine; a runner run with
            # the sweep takes minutes (pyproject's 300 s is for every other test)
            item.add_marker(pytest.mark.timeout(3600))


@pytest.fixture(scope="session")
def engine_installed() -> None:
    """Skip (fail under CI=true) when the engine's venv is not in place."""
    why = engine.missing()
    if why is None:
        return
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture(scope="session")
def models(engine_installed: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny target and drafts, made at test time (never downloaded)."""
    began = time.monotonic()
    made = engine.make_models(tmp_path_factory.mktemp("models"))
    record(
        "models.py (tokenizer, target, draft-zero, eagle, eagle3, mimo)", time.monotonic() - began
    )
    return made


@pytest.fixture(scope="module")
def before_engines(models: dict[str, Path]) -> None:
    """The models are made before the module takes the engines lock (tests/conftest.py)."""


def record(what: str, seconds: float) -> None:
    """Append one timing line to $WARMGATE_REALENGINE_TIMES (no-op when unset)."""
    if TIMES:
        with open(TIMES, "a", encoding="utf-8") as out:
            out.write(f"{seconds:8.1f} s  {what}\n")


@pytest.fixture(autouse=True)
def _timed(request: pytest.FixtureRequest) -> Iterator[None]:
    began = time.monotonic()
    yield
    record(request.node.nodeid, time.monotonic() - began)


# The runs' SDDs (tiny.tiny_sdd arguments): the default spec, refused; eagle3 k=2 with prefix
# caching and the probe; eagle k=3 on 64-token blocks without either (the sweep alone: 14 steps
# whose blocks fill up and cross, the drafter's calls 2 and 3).
RUNS: dict[str, dict[str, Any]] = {
    "refused": {"accept": False},
    "prefix-caching-on": {"method": "eagle3", "k": 2, "prefix_caching": True},
    "prefix-caching-off": {
        "method": "eagle",
        "k": 3,
        "prefix_caching": False,
        "probe": False,
        "block": 64,
    },
}


class RunnerRuns:
    """The runner's runs on the real engine (RUNS), each made once per session when first
    asked for; the CPU engine accepted but in ``refused``, the scheduler recorder loaded."""

    def __init__(self, models: dict[str, Path], factory: pytest.TempPathFactory) -> None:
        self.models, self.factory = models, factory
        self.done: dict[str, runs.RunnerRun] = {}

    def __getitem__(self, name: str) -> runs.RunnerRun:
        if name not in self.done:
            self.done[name] = self._run(name)
            record(f"runner run {name}", self.done[name].seconds)
        return self.done[name]

    def _run(self, name: str) -> runs.RunnerRun:
        tmp = self.factory.mktemp(name)
        sdd = tiny.tiny_sdd(**RUNS[name])
        plan = tiny.local_plan(tiny.operator_plan(sdd), self.models, tmp)
        return runs.run(plan, tmp, record=name != "refused")


@pytest.fixture(scope="session")
def runner_runs(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> RunnerRuns:
    """The runner's runs, shared by test_runner_real.py and test_sweep_scheduler.py."""
    return RunnerRuns(models, tmp_path_factory)
