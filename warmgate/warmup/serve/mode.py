"""Serve mode: run the serving engine under the runner, pass its output through, count drift.

`python3 -m warmgate.warmup --serve [--status-port N] [--state-file F] [--drafter-warmup D]
-- vllm serve ...`

- **Direct drafter warmup.** With ``--drafter-warmup D`` (the plan's drafter warmup document)
  the engine runs with the engine plugin loaded and ``WARMGATE_DRAFTER_WARMUP=D``: every
  serving process warms each drafter shape of the plan before ``/health`` answers, from the
  restored recipe cache, and a drafter compile after that is drift (``watch.py``).

- **Pass-through.** The engine's stdout and stderr bytes are written to the runner's own stdout
  and stderr as they arrive, unchanged (no decoding on that path), so `kubectl logs` reads the
  engine as before. The runner is no proxy: requests go straight to the engine's port.
- **No latency.** This process only moves bytes (system calls). Parsing runs in an observer
  process forked before the engine starts (`watch.py`), fed a copy through two pipes
  written without blocking: when the observer lags by a pipe's capacity (1 MiB where Linux
  allows), the copy is skipped and counted (``dropped_bytes``), never the output.
- **Same parser as warmup** (`logparse.LogParser`): "Configuration: ... was not warmed-up!" and
  "... bucket for ... was not prepared" lines, with the same formats and normalisation.
- **Survives engine restarts.** The counts live in ``--state-file`` on the Pod's emptyDir; when
  the engine exits, the runner exits with its code (so Kubernetes sees the crash and restarts
  the container, as without the runner), and the next start reloads the counts
  (``tally.ServeTally``, whose ``board()`` the status port serves).
- **Seam for more observers.** ``watch.Watch.line_hooks`` get every complete line (e.g.
  the `warmgate-hook ... compile ...` lines of issue 16); ``Watch.bump`` counts under ``hooks``.
Standard library only.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import mmap
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_ENV
from warmgate.warmup.hook import install as hookenv
from warmgate.warmup.serve import specdecode
from warmgate.warmup.serve.watch import DROPPED, observe

DEFAULT_STATE_FILE = Path("/warmgate/local/serve/observed.json")
_CHUNK = 64 * 1024
_COPY_PIPE_BYTES = 1024 * 1024  # F_SETPIPE_SZ; the default 64 KiB where it is refused
_OBSERVER_GRACE_S = 10.0


class Copies:
    """The write ends of the copy pipes, non-blocking; what does not fit is counted, not sent."""

    def __init__(self, fds: dict[str, int], dropped: mmap.mmap) -> None:
        self._fds, self._dropped = fds, dropped
        self._lock = threading.Lock()
        for fd in fds.values():
            os.set_blocking(fd, False)
            with contextlib.suppress(OSError, AttributeError):
                fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _COPY_PIPE_BYTES)

    def offer(self, stream: str, chunk: bytes) -> None:
        """Copy ``chunk`` to the observer if the pipe has room; never wait."""
        try:
            sent = os.write(self._fds[stream], chunk)
        except (BlockingIOError, BrokenPipeError):
            sent = 0
        except OSError:
            sent = 0
        if sent < len(chunk):
            with self._lock:
                skipped = DROPPED.unpack_from(self._dropped)[0] + len(chunk) - sent
                DROPPED.pack_into(self._dropped, 0, skipped)

    def close(self) -> None:
        """End of the engine's output: the observer drains what it has and exits."""
        for fd in self._fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)


def _pump(pipe: IO[bytes] | None, out_fd: int, stream: str, copies: Copies) -> threading.Thread:
    def run() -> None:
        if pipe is None:
            return
        fd = pipe.fileno()
        while chunk := os.read(fd, _CHUNK):
            _write_all(out_fd, chunk)
            copies.offer(stream, chunk)
        pipe.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:
            return  # our own output closed: keep the engine running, drop the copy


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m warmgate.warmup --serve")
    parser.add_argument("--status-port", type=int, help="GET /warmgate/status and /metrics")
    parser.add_argument("--state-file", type=Path, default=DEFAULT_STATE_FILE)
    parser.add_argument(
        "--spec-metrics-interval",
        type=float,
        default=specdecode.DEFAULT_INTERVAL_S,
        help="seconds between reads of the engine's spec-decode counters (0: never)",
    )
    parser.add_argument(
        "--drafter-warmup",
        type=Path,
        help="the drafter warmup document (warmgate-drafter-warmup/1): load the engine plugin "
        "into the engine and warm every drafter shape it lists before /health (issue 33)",
    )
    parser.add_argument("engine", nargs=argparse.REMAINDER, help="-- the engine's command")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the engine until it exits; return its exit code (128 + N for signal N)."""
    args = _parser().parse_args(list(argv))
    engine = args.engine[1:] if args.engine[:1] == ["--"] else args.engine
    if not engine:
        print("warmgate: --serve needs the engine's command after --", file=sys.stderr)
        return 2
    dropped = mmap.mmap(-1, DROPPED.size)  # shared with the observer after the fork
    pipes = {"out": os.pipe(), "err": os.pipe()}
    sys.stdout.flush()
    sys.stderr.flush()
    observer = os.fork()  # before any thread exists: the child runs only the observer
    if observer == 0:
        _observer_child(pipes, args, dropped, engine)
    for read_end, _ in pipes.values():
        os.close(read_end)
    copies = Copies({stream: write_end for stream, (_, write_end) in pipes.items()}, dropped)
    code = _run(engine, copies, engine_env(args))
    copies.close()
    _reap(observer)
    return code


def _observer_child(
    pipes: dict[str, tuple[int, int]],
    args: argparse.Namespace,
    dropped: mmap.mmap,
    engine: list[str],
) -> None:
    for _, write_end in pipes.values():
        os.close(write_end)
    code = 0
    copies = {r: stream for stream, (r, _) in pipes.items()}
    try:
        observe(
            copies,
            args.state_file,
            args.status_port,
            dropped,
            engine=engine,
            interval_s=args.spec_metrics_interval,
        )
    except Exception as exc:  # an observer bug must never touch the engine
        print(f"warmgate: serve-mode observer stopped: {exc!r}", file=sys.stderr)
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _reap(pid: int) -> None:
    """Wait for the observer to save its last counts; kill it if it does not finish."""
    deadline = time.monotonic() + _OBSERVER_GRACE_S
    while time.monotonic() < deadline:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)


def engine_env(args: argparse.Namespace) -> dict[str, str] | None:
    """The engine's environment: ours, plus the engine plugin and the drafter warmup document
    when ``--drafter-warmup`` names one (None: inherit ours unchanged)."""
    if args.drafter_warmup is None:
        return None
    env = dict(os.environ)
    try:
        root = hookenv.install(args.state_file.parent)
    except OSError as exc:  # the engine serves anyway; its plugin then logs nothing
        print(f"warmgate: cannot install the engine plugin: {exc}", file=sys.stderr)
        return None
    hookenv.hook_env(env, root)
    env[DRAFTER_WARMUP_ENV] = str(args.drafter_warmup)
    return env


def _run(engine: list[str], copies: Copies, env: dict[str, str] | None = None) -> int:
    try:
        proc = subprocess.Popen(engine, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as exc:
        print(f"warmgate: cannot start {engine[0]}: {exc}", file=sys.stderr)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    threads = [_pump(proc.stdout, 1, "out", copies), _pump(proc.stderr, 2, "err", copies)]
    code = proc.wait()
    for thread in threads:
        thread.join()
    return 128 - code if code < 0 else code
