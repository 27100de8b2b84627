"""Start `vllm serve` (or the plan's stand-in) with the plan's flags and env, stream and stop it."""

from __future__ import annotations

import codecs
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from warmgate.contract.engine import (
    LOGGING_ENV,
    LOGGING_ENV_REMOVED,
    engine_command,
    recipe_cache_config,
)
from warmgate.contract.order import WarmupOrder

Sink = Callable[[str, str], None]
_CHUNK = 64 * 1024


def engine_argv(plan: WarmupOrder) -> list[str]:
    """The full command line: the plan's command prefix, the model, then the pinned flags."""
    return engine_command(plan.engine)


def engine_env(plan: WarmupOrder, seed_file: Path, reuse_cache: bool) -> dict[str, str]:
    """The engine's environment: ours, then the plan's, then the runner-owned variables."""
    env = dict(os.environ)
    env.update(plan.engine.env)
    for name in LOGGING_ENV_REMOVED:
        env.pop(name, None)
    env.update(LOGGING_ENV)
    env["VLLM_BUCKETING_FROM_FILE"] = str(seed_file)  # §2.6: seeds only, vLLM expands them.
    env["VLLM_SKIP_WARMUP"] = "false"  # §2.2: the whole point of the Job is the warmup.
    env["PT_HPU_RECIPE_CACHE_CONFIG"] = recipe_cache_config(
        plan.cache.local_dir, reuse_cache, plan.cache.size_mb
    )
    env.setdefault("PYTHONUNBUFFERED", "1")  # log lines must reach the parser as they happen.
    return env


class EngineProcess:
    """A running engine; its stdout and stderr are decoded and handed to ``sink`` per stream."""

    def __init__(self, argv: list[str], env: Mapping[str, str], log_path: Path, sink: Sink) -> None:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = log_path.open("a", encoding="utf-8", errors="replace")
        self._lock = threading.Lock()
        self._sink = sink
        # A new session makes the engine the leader of its own process group, so stopping it
        # also stops vLLM's EngineCore and worker children.
        try:
            self.proc = subprocess.Popen(
                argv,
                env=dict(env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError:
            self._log.close()
            raise
        self._readers = [
            self._reader(self.proc.stdout, "stdout"),
            self._reader(self.proc.stderr, "stderr"),
        ]

    def _reader(self, pipe: IO[bytes] | None, name: str) -> threading.Thread:
        thread = threading.Thread(target=self._pump, args=(pipe, name), daemon=True)
        thread.start()
        return thread

    def _pump(self, pipe: IO[bytes] | None, name: str) -> None:
        if pipe is None:
            return
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        fd = pipe.fileno()
        while chunk := os.read(fd, _CHUNK):
            self._deliver(decoder.decode(chunk), name)
        self._deliver(decoder.decode(b"", final=True), name)
        pipe.close()

    def _deliver(self, text: str, name: str) -> None:
        if not text:
            return
        with self._lock:
            if not self._log.closed:
                self._log.write(text)
            self._sink(text, name)

    def alive(self) -> bool:
        """True while the engine process has not exited."""
        return self.proc.poll() is None

    def exited_within(self, seconds: float) -> bool:
        """True when the engine process has exited or exits within ``seconds``. A request that
        failed because the engine died can fail before the process is gone: the kernel closes a
        dying process's sockets before it reaps it, so ``alive`` may still say True."""
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True

    def stop(self, grace_s: float) -> int:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; wait for the output to drain."""
        if self.alive():
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait()
        else:
            # The leader is gone but orphaned children may still hold the pipes open.
            self._signal(signal.SIGKILL)
        self.drain(grace_s)
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def drain(self, timeout_s: float) -> None:
        """Wait for both readers to reach end of file, then close the log copy."""
        deadline = time.monotonic() + timeout_s
        for thread in self._readers:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            self._log.flush()
            if not self._log.closed:
                self._log.close()


def echo(text: str, stream: str) -> None:
    """Pass the engine's output through to our stderr so `kubectl logs` still shows it."""
    del stream
    sys.stderr.write(text)
    sys.stderr.flush()
