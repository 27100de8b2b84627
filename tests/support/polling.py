"""Polling for the tests that wait on a cluster: a check that comes true within a time limit."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], bool], seconds: float) -> bool:
    """Whether ``check`` comes true within ``seconds`` (polled every 0.2 s)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def wait_for(
    what: str, check: Callable[[], Any], timeout: float = 180.0, every: float = 0.5
) -> Any:
    """Poll ``check`` every ``every`` s until it returns something truthy and return that; fail
    with ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
