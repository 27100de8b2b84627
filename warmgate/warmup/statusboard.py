"""The runner's read-only status endpoint: JSON for the operator, Prometheus text for scrapers.

The warmup Pod and the serving Pods get no Kubernetes API rights (docs/operator.md, "How
progress and drift reach the operator"). Instead the runner answers two plain HTTP GETs on
its status port: ``/warmgate/status`` (a small JSON document the operator reads through the
Pod IP) and ``/metrics`` (the same figures for Prometheus). It serves from a thread of its
own, so a slow reader never delays the engine or the log parser. Standard library only.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

STATUS_PATH = "/warmgate/status"
METRICS_PATH = "/metrics"
STATUS_VERSION = 1
# e.g. ("warmgate_runner_unwarmed_shapes", "Distinct shapes ...", 3.0)
Sample = tuple[str, str, float]


class Board:
    """A thread-safe snapshot of what the runner wants to say; writers set keys, readers copy."""

    def __init__(self, mode: str) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._doc: dict[str, Any] = {"v": STATUS_VERSION, "mode": mode}
        self._samples: Callable[[], list[Sample]] = list

    def update(self, **fields: Any) -> None:
        """Set top-level keys of the document."""
        with self._lock:
            self._doc.update(fields)

    def set_in(self, key: str, sub: str, value: Any) -> None:
        """Set ``doc[key][sub]`` (e.g. the progress of one phase)."""
        with self._lock:
            self._doc.setdefault(key, {})[sub] = value

    def set_samples(self, samples: Callable[[], list[Sample]]) -> None:
        """The gauges ``/metrics`` exposes, computed when it is read."""
        self._samples = samples

    def snapshot(self) -> dict[str, Any]:
        """A deep enough copy to serialise outside the lock, with the elapsed seconds."""
        with self._lock:
            doc: dict[str, Any] = json.loads(json.dumps(self._doc))
        doc["elapsed_s"] = round(time.monotonic() - self._started, 1)
        return doc

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
