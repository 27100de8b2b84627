"""Start `vllm serve` (or the plan's stand-in) with the plan's flags and env, stream and stop it."""

from __future__ import annotations

import codecs
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from warmgate.warmup.plan import EngineSpec, Plan

Sink = Callable[[str, str], None]
_CHUNK = 64 * 1024


def engine_argv(plan: Plan) -> list[str]:
    """The full command line: the plan's command prefix, the model, then the pinned flags."""
    return engine_command(plan.engine)


def engine_command(spec: EngineSpec) -> list[str]:
    """The command line of one engine definition (the serving Deployment runs this one too)."""
    argv = [*spec.command, spec.model, "--host", spec.host, "--port", str(spec.port)]
    argv += ["--served-model-name", spec.served_model_name]
    argv += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    if spec.max_model_len is not None:
        argv += ["--max-model-len", str(spec.max_model_len)]
    if spec.speculative_config is not None:
        argv += ["--speculative-config", json.dumps(spec.speculative_config, sort_keys=True)]
    if spec.num_gpu_blocks_override is not None:
        # §2.1: pins num_hpu_blocks so warmup and serving generate the same decode shapes.
        argv += ["--num-gpu-blocks-override", str(spec.num_gpu_blocks_override)]
    return argv + list(spec.args)


def recipe_cache_config(local_dir: Path, reuse: bool, size_mb: int) -> str:
    """PT_HPU_RECIPE_CACHE_CONFIG=<dir>,<delete>,<MB> (§4.6); DELETE=False keeps restored ones."""
    return f"{local_dir},{'False' if reuse else 'True'},{size_mb}"


# vLLM's logging must print the lines the parser reads, whatever the image sets (vLLM v0.26.0):
# VLLM_CONFIGURE_LOGGING=0 drops vLLM's handler, so INFO records vanish and no process prefix
# is written (vllm/logger.py:167-201, vllm/utils/system_utils.py:242-243); a level above INFO
# hides the bucket lists, "Usable num_blocks" and "Warmup finished" (logger.py:59-66); a config
# file replaces the format (logger.py:179-193); NO_COLOR and VLLM_LOGGING_COLOR=0 keep ANSI
# colour out of the prefix and the records (system_utils.py:204-211, logger.py:29-38). The
# parser still strips colour and prefixes for engines that ignore these.
LOGGING_ENV = {
    "VLLM_CONFIGURE_LOGGING": "1",
    "VLLM_LOGGING_LEVEL": "INFO",
    "VLLM_LOGGING_PREFIX": "",
    "VLLM_LOGGING_STREAM": "ext://sys.stdout",
    "VLLM_LOGGING_COLOR": "0",
    "NO_COLOR": "1",
}
LOGGING_ENV_REMOVED = ("VLLM_LOGGING_CONFIG_PATH",)


def engine_env(plan: Plan, seed_file: Path, reuse_cache: bool) -> dict[str, str]:
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
