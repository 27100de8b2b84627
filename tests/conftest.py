"""Shared pytest configuration: hypothesis profiles (CI runs more examples), the tiers' table."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings
from support import node_share, tier_report

# Timing is never a verdict here (benchmarks measure speed); a loaded 2-core machine must not
# turn a slow example into a failure.
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")


def pytest_configure(config: pytest.Config) -> None:
    """Every run closes with a table of its tiers (tests/support/tier_report.py)."""
    tier_report.register(config)


@pytest.fixture(scope="module")
def before_engines() -> None:
    """What a real-engine module makes before it takes the engines lock: work that needs no
    engine's memory (the tiny models, tests/realengine/conftest.py), so it overlaps the other
    run's engines instead of waiting behind them. Nothing by default."""


@pytest.fixture(scope="module", autouse=True)
def _real_engines_alone(request: pytest.FixtureRequest) -> Iterator[None]:
    """A module that runs real vLLM engines holds the engines lock while it runs, when several
    runs share the machine (tests/support/node_share.py)."""
    if request.node.get_closest_marker("realengine") is None:
        yield
        return
    request.getfixturevalue("before_engines")
    with node_share.engines_lock():
        yield
