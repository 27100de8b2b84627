"""Fixtures for the builder tests: every example, planned once per session."""

from __future__ import annotations

import pytest
from support.resource_cases import EXAMPLES, Case, make_case


@pytest.fixture(scope="session")
def cases() -> list[Case]:
    """Every example, planned once per session."""
    return [make_case(path) for path in EXAMPLES]


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.stem)
def case(request: pytest.FixtureRequest, cases: list[Case]) -> Case:
    """One example at a time."""
    return next(c for c in cases if c.name == request.param.stem)
