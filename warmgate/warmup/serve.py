"""Serve mode: run the serving engine under the runner, pass its output through, count drift.

`python3 -m warmgate.warmup --serve [--status-port N] [--state-file F] -- vllm serve ...`

- **Pass-through.** The engine's stdout and stderr bytes are written to the runner's own stdout
  and stderr as they arrive, unchanged (no decoding on that path), so `kubectl logs` reads the
  engine as before. The runner is no proxy: requests go straight to the engine's port.
- **No latency.** The engine never waits for the parser: the pumps hand a copy of each chunk
  to a bounded queue without blocking; if the parser ever fell 16 MiB behind, chunks would be
  dropped from the copy (counted in ``dropped_bytes``), never from the output.
- **Same parser as warmup** (`logparse.LogParser`): "Configuration: ... was not warmed-up!" and
  "... bucket for ... was not prepared" lines, with the same formats and normalisation.
- **Survives engine restarts.** The counts live in ``--state-file`` on the Pod's emptyDir; when
  the engine exits, the runner exits with its code (so Kubernetes sees the crash and restarts
  the container, as without the runner), and the next start reloads the counts.
- **Seam for more observers.** ``Watch.line_hooks`` get every complete line (e.g. the
  `warmgate-hook ... compile ...` lines of issue 16); ``Watch.bump`` counts under ``hooks``.
Standard library only.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any

from warmgate.warmup.logparse import LogParser
from warmgate.warmup.statusboard import Board, Sample, serve_board

DEFAULT_STATE_FILE = Path("/warmgate/local/serve/observed.json")
MAX_LISTED = 1000  # distinct shapes kept; the counts go on beyond it
_CHUNK = 64 * 1024
_QUEUE_CHUNKS = 256  # 16 MiB of output the parser may lag behind before copies are dropped
_EOL = re.compile(r"\r\n|\r|\n")
LineHook = Callable[[str], None]


class Watch:
    """The engine's output as the serve mode reads it: the warmup parser plus line hooks."""

    def __init__(self, state: dict[str, Any], on_change: Callable[[], None]) -> None:
        self.state = state
        self.parser = LogParser()
        self.line_hooks: list[LineHook] = []
        self._on_change = on_change
        self._partial: dict[str, str] = {}
        self._taken = (0, 0)
        self._seen: dict[str, set[str]] = {}

    def feed(self, text: str, stream: str) -> None:
        """Parse a chunk of one stream; report when a new shape appeared."""
        self.parser.feed(text, stream)
        if self.line_hooks:
            self._lines(text, stream)
        if self._collect():
            self._on_change()

    def _lines(self, text: str, stream: str) -> None:
        pieces = _EOL.split(self._partial.get(stream, "") + text)
        self._partial[stream] = pieces.pop()[-_CHUNK:]
        for line in pieces:
            for hook in self.line_hooks:
                hook(line)

    def bump(self, name: str, by: int = 1) -> None:
        """A hook's counter, exposed under ``hooks`` in the status and as a metric."""
        hooks = self.state.setdefault("hooks", {})
        hooks[name] = int(hooks.get(name, 0)) + by
        self._on_change()

    def _collect(self) -> bool:
        """Take the parser's new entries (it appends, each distinct once per run); a shape an
        earlier engine run of this Pod already logged is not counted again."""
        log, changed = self.parser.state, False
        for shape in log.unwarmed[self._taken[0] :]:
            changed |= self._add("unwarmed", shape.text)
        for miss in log.not_prepared[self._taken[1] :]:
            changed |= self._add("not_prepared", f"{miss.phase} {miss.requested} -> {miss.added}")
        self._taken = (len(log.unwarmed), len(log.not_prepared))
        return changed

    def _add(self, kind: str, text: str) -> bool:
        seen = self._seen.setdefault(kind, set(self.state[kind]))
        if text in seen:
            return False
        seen.add(text)
        self.state[f"{kind}_count"] += 1
        if len(self.state[kind]) < MAX_LISTED:
            self.state[kind].append(text)
        return True


def fresh_state() -> dict[str, Any]:
    """What serve mode records: distinct shapes, their counts, engine starts, dropped bytes."""
    return {
        "unwarmed": [],
        "unwarmed_count": 0,
        "not_prepared": [],
        "not_prepared_count": 0,
        "engine_starts": 0,
        "dropped_bytes": 0,
        "hooks": {},
    }


def load_state(path: Path) -> dict[str, Any]:
    """The counts of earlier engine runs in this Pod; fresh ones when unreadable."""
    state = fresh_state()
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return state
    if isinstance(found, dict):
        state.update({k: v for k, v in found.items() if type(v) is type(state.get(k))})
    return state


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Write through a temporary name, so a restart never reads half a file."""
    with contextlib.suppress(OSError):  # counting must never stop the engine
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps(state, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


def samples(state: dict[str, Any]) -> list[Sample]:
    """The serving Pod's /metrics."""
    found: list[Sample] = [
        ("warmgate_runner_unwarmed_shapes", "Distinct shapes the engine ran unwarmed.", 0.0),
        ("warmgate_runner_not_prepared_buckets", "Distinct bucket lookups not prepared.", 0.0),
        ("warmgate_runner_engine_starts", "Engine starts in this Pod.", 0.0),
        ("warmgate_runner_dropped_log_bytes", "Engine output the parser skipped.", 0.0),
    ]
    keys = ("unwarmed_count", "not_prepared_count", "engine_starts", "dropped_bytes")
    return [(n, h, float(state[k])) for (n, h, _), k in zip(found, keys, strict=True)]


class Passthrough:
    """Pumps one engine pipe to our own descriptor, unchanged, and a copy to the parser."""

    def __init__(self, copies: queue.Queue[tuple[str, bytes] | None], state: dict[str, Any]):
        self._copies, self._state = copies, state
        self._lock = threading.Lock()

    def pump(self, pipe: IO[bytes] | None, out_fd: int, stream: str) -> threading.Thread:
        """Start the pump thread of one stream."""
        thread = threading.Thread(target=self._run, args=(pipe, out_fd, stream), daemon=True)
        thread.start()
        return thread

    def _run(self, pipe: IO[bytes] | None, out_fd: int, stream: str) -> None:
        if pipe is None:
            return
        fd = pipe.fileno()
        while chunk := os.read(fd, _CHUNK):
            _write_all(out_fd, chunk)
            try:
                self._copies.put_nowait((stream, chunk))
            except queue.Full:
                with self._lock:
                    self._state["dropped_bytes"] += len(chunk)
        pipe.close()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except OSError:
            return  # our own output closed: keep the engine running, drop the copy


def _parse_loop(copies: queue.Queue[tuple[str, bytes] | None], watch: Watch) -> None:
    decoders = {s: codecs.getincrementaldecoder("utf-8")(errors="replace") for s in ("o", "e")}
    while (item := copies.get()) is not None:
        stream, chunk = item
        watch.feed(decoders[stream[0]].decode(chunk), stream)
    watch.parser.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python3 -m warmgate.warmup --serve")
    parser.add_argument("--status-port", type=int, help="GET /warmgate/status and /metrics")
    parser.add_argument("--state-file", type=Path, default=DEFAULT_STATE_FILE)
    parser.add_argument("engine", nargs=argparse.REMAINDER, help="-- the engine's command")
    return parser


def main(argv: Sequence[str]) -> int:
    """Run the engine until it exits; return its exit code (128 + N for signal N)."""
    args = _parser().parse_args(list(argv))
    engine = args.engine[1:] if args.engine[:1] == ["--"] else args.engine
    if not engine:
        print("warmgate: --serve needs the engine's command after --", file=sys.stderr)
        return 2
    state = load_state(args.state_file)
    state["engine_starts"] += 1
    board = Board("serve")
    publish = _publisher(board, state, args.state_file)
    publish()
    board.set_samples(lambda: samples(state))
    if args.status_port is not None:
        serve_board(board, args.status_port)
    return _run(engine, Watch(state, publish), state)


def _publisher(board: Board, state: dict[str, Any], path: Path) -> Callable[[], None]:
    def publish() -> None:
        board.update(**json.loads(json.dumps(state)))
        save_state(path, state)

    return publish


def _run(engine: list[str], watch: Watch, state: dict[str, Any]) -> int:
    try:
        proc = subprocess.Popen(engine, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        print(f"warmgate: cannot start {engine[0]}: {exc}", file=sys.stderr)
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: proc.send_signal(signum))
    copies: queue.Queue[tuple[str, bytes] | None] = queue.Queue(maxsize=_QUEUE_CHUNKS)
    parse = threading.Thread(target=_parse_loop, args=(copies, watch), daemon=True)
    parse.start()
    pumps = Passthrough(copies, state)
    threads = [pumps.pump(proc.stdout, 1, "out"), pumps.pump(proc.stderr, 2, "err")]
    code = proc.wait()
    for thread in threads:
        thread.join()
    copies.put(None)
    parse.join(timeout=10)
    return 128 - code if code < 0 else code
