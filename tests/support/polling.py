"""Polling for integration tests: a check that comes true within a time limit."""

from __future__ import annotations

import time
from collections.abc import Callable


def eventually(check: Callable[[], bool], seconds: float) -> bool:
    """Whether ``check`` comes true within ``seconds`` (polled every 0.2 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()
