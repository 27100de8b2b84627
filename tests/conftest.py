"""Shared pytest configuration: hypothesis profiles (CI runs more examples)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Timing is never a verdict here (benchmarks measure speed); a loaded 2-core machine must not
# turn a slow example into a failure.
settings.register_profile(
    "dev", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci" if os.environ.get("CI", "").lower() == "true" else "dev")
