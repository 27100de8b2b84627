"""The liveness endpoint: 200 while the operator makes progress, 503 with the reasons when not.

kopf's own endpoint answers as long as its event loop runs, so 16 sync threads stuck on
half-open connections kept it green while nothing synced (issue 23 item 8). This one is served
from a thread of its own for the whole life of the process (a standby has no kopf running), and
fails when any registered check names a reason:

- `SyncProgress`: syncs wait (asked for, queued or running) and none finished for
  `Settings.stall_seconds` (a sync that ends in an API error finished too: the timeouts bound
  every request, so a sync ends within a few read timeouts however the cluster behaves);
- `Heartbeat`: the event loop that runs kopf and the followers did not run for `LOOP_SECONDS`;
- the followers' task ended;
- a standby's leader election made no attempt for a while (`leader.Elector.standby_stalled`).

The kubelet restarts the container after `failureThreshold` failed probes in a row (chart
values `liveness.*`: 3 x 15 s).
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.parse
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

log = logging.getLogger(__name__)

# A check returns None while healthy, else why not.
Check = Callable[[], str | None]
Clock = Callable[[], float]
# The event loop ticks every second; this long without a tick fails the probe.
LOOP_SECONDS: Final = 30.0
HTTP_OK: Final = 200
HTTP_UNAVAILABLE: Final = 503


class SyncProgress:
    """Syncs asked for and finished: stalled when some wait and none finished for a while."""

    def __init__(self, stall_seconds: float, clock: Clock = time.monotonic) -> None:
        self._stall, self._clock = stall_seconds, clock
        self._pending = 0
        self._since = clock()  # the last finish, or when the first waiting sync was asked for
        self._lock = threading.Lock()

    def started(self) -> None:
        with self._lock:
            if self._pending == 0:
                self._since = self._clock()
            self._pending += 1

    def finished(self) -> None:
        with self._lock:
            self._pending -= 1
            self._since = self._clock()

    def stalled(self) -> str | None:
        with self._lock:
            pending, idle = self._pending, self._clock() - self._since
        if pending and idle > self._stall:
            return f"{pending} sync(s) wait and none finished for {idle:.0f} s"
        return None


class Heartbeat:
    """When the event loop last ran (`beat`, from a task of the loop)."""

    def __init__(self, bound: float = LOOP_SECONDS, clock: Clock = time.monotonic) -> None:
        self._bound, self._clock = bound, clock
        self._last = clock()

    def beat(self) -> None:
        self._last = self._clock()

    def stalled(self) -> str | None:
        idle = self._clock() - self._last
        return f"the event loop did not run for {idle:.0f} s" if idle > self._bound else None


class Liveness:
    """The named checks the endpoint runs on every probe."""

    def __init__(self) -> None:
        self._checks: dict[str, Check] = {}
        self._lock = threading.Lock()

    def add(self, name: str, check: Check) -> None:
        with self._lock:
            self._checks[name] = check

    def remove(self, name: str) -> None:
        with self._lock:
            self._checks.pop(name, None)

    def failures(self) -> dict[str, str]:
        with self._lock:
            checks = dict(self._checks)
        found = {name: check() for name, check in checks.items()}
        return {name: reason for name, reason in found.items() if reason is not None}


def serve(endpoint: str, liveness: Liveness) -> ThreadingHTTPServer:
    """Answer GET ``endpoint``'s path (e.g. http://0.0.0.0:8081/healthz) from a daemon thread."""
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme != "http" or parts.port is None:
        raise ValueError(f"--liveness: {endpoint!r} is not http://HOST:PORT/PATH")
    path = parts.path or "/"

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if urllib.parse.urlsplit(self.path).path != path:
                self.send_error(404)
                return
            failures = liveness.failures()
            body = json.dumps({"ok": not failures, "failures": failures}).encode()
            self.send_response(HTTP_UNAVAILABLE if failures else HTTP_OK)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            if failures:
                log.error(f"Liveness probe failed: {failures}")

        def log_message(self, format: str, *args: object) -> None:
            """The probes every few seconds are no news (failures are logged above)."""

    server = ThreadingHTTPServer((parts.hostname or "0.0.0.0", parts.port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="liveness", daemon=True).start()
    return server


__all__ = ["Heartbeat", "Liveness", "SyncProgress", "serve"]
