"""The sync's unit tests share one world: a SpecDecodeDeployment, the fake cluster and the clock
(sync_world.py). A module that needs another world defines its own ``world``."""

from __future__ import annotations

import pytest
from sync_world import World


@pytest.fixture
def world() -> World:
    return World()
