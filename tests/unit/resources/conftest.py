"""Fixtures for the builder tests; makes ``resources_cases`` (next to this file) importable."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

_HERE = str(Path(__file__).resolve().parent)
if _HERE not in sys.path:
    sys.path.insert(0, _HERE)

from resources_cases import EXAMPLES, Case, make_case  # noqa: E402


@pytest.fixture(scope="session")
def cases() -> list[Case]:
    """Every example, planned once per session."""
    return [make_case(path) for path in EXAMPLES]


@pytest.fixture(params=EXAMPLES, ids=lambda p: p.stem)
def case(request: pytest.FixtureRequest, cases: list[Case]) -> Case:
    """One example at a time."""
    return next(c for c in cases if c.name == request.param.stem)
