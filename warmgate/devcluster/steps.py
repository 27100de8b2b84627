"""One line per build step with its time, the tools' own output in a log file the line names.

The Python twin of ``hack/lib/steps.sh`` (same lines, same log folder), used by the image
builds of the dev cluster: a step prints ``LABEL ... (log: FILE)`` when it starts and
``LABEL: 57 s`` when it ends; what buildah, mmdebstrap and pip print goes to the log; a failure
prints ``LABEL: FAILED after 12 s (...)``, the log's last lines and the file, then raises
``StepFailed``. A step still running after ``STEPS_TICK_SECONDS`` (120) says so at that interval.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from warmgate.devcluster.controlplane import REPO_ROOT

Say = Callable[[str], None]
LOG_DIR: Final = Path(os.environ.get("STEPS_LOG_DIR") or REPO_ROOT / ".cache" / "logs")
TICK_SECONDS: Final = float(os.environ.get("STEPS_TICK_SECONDS") or 120)
TAIL_LINES: Final = 25


class StepFailed(RuntimeError):
    """A step's command failed; the lines above already showed the log's tail."""


def duration(seconds: float) -> str:
    """'18 s', '9 min 2 s' (as steps.sh prints it)."""
    s = int(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s"


def shown(path: Path) -> str:
    """The path relative to the repository when it is inside it (shorter lines)."""
    try:
        return str(path.relative_to(REPO_ROOT))
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Step:
    """A running step: the commands it runs write their output to its log."""

    log: Path

    def run(self, cmd: Sequence[str], cwd: Path | None = None) -> str:
        """Run ``cmd``; stdout is returned and logged, stderr logged. Raise on a failure."""
        with self.log.open("a") as log:
            log.write(f"$ {' '.join(cmd)}\n")
            log.flush()
            done = subprocess.run(
                cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=log, text=True, check=False
            )
            log.write(done.stdout)
        if done.returncode != 0:
            raise StepFailed(f"{' '.join(cmd[:6])} ... exited with {done.returncode}")
        return done.stdout


class Steps:
    """Prints each step through ``say`` (which adds its own prefix, e.g. 'dev cluster: ')."""

    def __init__(self, say: Say, prefix: str = "devcluster", log_dir: Path | None = None) -> None:
        self.say, self.prefix, self.log_dir = say, prefix, log_dir or LOG_DIR

    @contextlib.contextmanager
    def step(self, name: str, label: str, about: str = "") -> Iterator[Step]:
        """Time the block, log what it runs, and print its start, its end or its failure;
        ``about`` (how long it usually takes) goes in the first line only."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{self.prefix}.{name}.log"
        log.write_text(f"== {datetime.now(UTC):%Y-%m-%dT%H:%M:%SZ} {label}\n")
        self.say(f"{label}{f' ({about})' if about else ''} ... (log: {shown(log)})")
        began, stop = time.monotonic(), threading.Event()
        ticker = threading.Thread(target=self._tick, args=(label, began, stop), daemon=True)
        ticker.start()
        try:
            yield Step(log)
        except Exception as exc:
            self._failed(label, log, began, exc)
            raise StepFailed(f"{label}: {exc} (the whole output: {log})") from exc
        finally:
            stop.set()
        self.say(f"{label}: {duration(time.monotonic() - began)}")

    def _tick(self, label: str, began: float, stop: threading.Event) -> None:
        while not stop.wait(TICK_SECONDS):
            self.say(f"{label}: still running ({duration(time.monotonic() - began)})")

    def _failed(self, label: str, log: Path, began: float, exc: Exception) -> None:
        took = duration(time.monotonic() - began)
        self.say(f"{label}: FAILED after {took} ({exc}); the last lines of {shown(log)}:")
        for line in log.read_text(errors="replace").splitlines()[-TAIL_LINES:]:
            self.say(f"    {line}")
        self.say(f"the whole output: {log}")
