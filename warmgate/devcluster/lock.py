"""A machine-wide lock: two worktrees never run two kubelets or containerds at once.

flock(2) on a file under /run/lock. The lock belongs to the open file, so the teardown
process that outlives a killed test run (``reaper``) keeps it until the machine is clean.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path

from warmgate.devcluster.layout import LOCK_FILE


class MachineLock:
    """An exclusive flock; ``acquire`` waits for the holder and says who it is."""

    def __init__(self, path: Path = LOCK_FILE) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, progress: Callable[[str], None], timeout: float = 3600.0) -> MachineLock:
        """Take the lock, waiting up to ``timeout`` seconds for another cluster to stop."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        deadline, told = time.monotonic() + timeout, False
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(fd)
                    raise TimeoutError(f"{self.path} is held by {self.holder()}") from None
                if not told:
                    progress(f"waiting for the dev cluster of {self.holder()} to stop")
                    told = True
                time.sleep(2)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()} in {Path.cwd()}\n".encode())
        self.fd = fd
        return self

    def holder(self) -> str:
        """Who holds the lock, as its holder wrote it."""
        try:
            return self.path.read_text().strip() or "another process"
        except OSError:
            return "another process"

    def release(self) -> None:
        """Close the file (the lock goes when no process holds it open any more)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
