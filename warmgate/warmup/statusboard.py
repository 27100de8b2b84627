"""The runner's read-only status endpoint: JSON for the operator, Prometheus text for scrapers.

The warmup Pod and the serving Pods get no Kubernetes API rights (docs/operator.md, "How
progress and drift reach the operator"). Instead the runner answers two plain HTTP GETs on
its status port: ``/warmgate/status`` (a small JSON document the operator reads through the
Pod IP) and ``/metrics`` (the same figures for Prometheus). It serves from a thread of its
own, so a slow reader never delays the engine or the log parser. The document is the shared
type of contract/board.py, which the operator reads back. Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from warmgate.contract.board import METRICS_PATH, STATUS_PATH, RunnerBoard, WarmupBoard

# e.g. ("warmgate_runner_unwarmed_shapes", "Distinct shapes ...", 3.0)
Sample = tuple[str, str, float]


class Board:
    """The runner's current board (a frozen `WarmupBoard` or `ServeBoard`, contract/board.py),
    thread-safe: writers replace it, readers serialise the one they got, outside the lock."""

    def __init__(self, board: RunnerBoard) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._board = board
        self._samples: Callable[[], list[Sample]] = list

    def publish(self, board: RunnerBoard) -> None:
        """Show ``board`` from now on."""
        with self._lock:
            self._board = board

    def progress(self, what: str, done: int, total: int) -> None:
        """A warmup's counter (e.g. the decode phase's [57, 143]); nothing on a serving board."""
        with self._lock:
            if isinstance(self._board, WarmupBoard):
                self._board = self._board.with_progress(what, done, total)

    def stage(self, name: str) -> None:
        """A warmup's stage (e.g. "probe"); nothing on a serving board."""
        with self._lock:
            if isinstance(self._board, WarmupBoard):
                self._board = replace(self._board, stage=name)

    def set_samples(self, samples: Callable[[], list[Sample]]) -> None:
        """The gauges ``/metrics`` exposes, computed when it is read."""
        self._samples = samples

    def snapshot(self) -> dict[str, Any]:
        """The board's document, with the seconds since the runner started."""
        with self._lock:
            board = self._board
        return replace(board, elapsed_s=round(time.monotonic() - self._started, 1)).to_json()

    def metrics_text(self) -> str:
        """Prometheus text exposition format 0.0.4 of the samples."""
        lines = []
        for name, help_text, value in self._samples():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {value:g}"]
        return "\n".join(lines) + "\n"


def _handler(board: Board) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            del format, args  # the engine's output is the container log; keep it clean

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == STATUS_PATH:
                body, kind = json.dumps(board.snapshot()).encode(), "application/json"
            elif path == METRICS_PATH:
                body, kind = board.metrics_text().encode(), "text/plain; version=0.0.4"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    return Handler


def serve_board(board: Board, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:
    """Serve the board on ``host:port`` from a daemon thread; returns the server (to stop it)."""
    server = ThreadingHTTPServer((host, port), _handler(board))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2})
    thread.daemon = True
    thread.start()
    return server
