"""Bursts of completions: every request of a burst reaches the server at (nearly) the same time.

The probe and the drafter sweep both rely on the scheduler seeing a burst as one batch (§3.6;
the sweep's first assumption: its requests reach the scheduler within two engine steps). So each
request gets its own thread and connection, every connection is opened first, and only then do
all threads send together (a barrier). That decides when the requests leave the runner, not
when the engine's API server hands them to its scheduler; so each request is named as one of
its burst (``X-Request-Id: wgburst-<key>-<i>of<n>``), and the engine hook's burst gate holds
the burst at the scheduler until it is whole (``hook/burst_gate.py``). Plain ``http.client``
on the engine's loopback address: no proxy from the environment applies.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import secrets
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from warmgate.warmup.hook.burst_gate import burst_request_id

PATH = "/v1/completions"
BARRIER_S = 30.0  # how long connected threads wait for the slowest to connect


def send_burst(base_url: str, bodies: list[dict[str, Any]], timeout: float) -> list[str | None]:
    """POST every body to /v1/completions at once and wait for all of them: None per success,
    else a short error (an HTTP status with the start of its body, a connection error, or a
    response without ``choices``)."""
    payloads = [json.dumps(b).encode("utf-8") for b in bodies]
    if not payloads:
        return []
    url = urllib.parse.urlsplit(base_url)
    start = threading.Barrier(len(payloads))
    key = secrets.token_hex(6)
    ids = [burst_request_id(key, i, len(payloads)) for i in range(len(payloads))]

    def one(data: bytes, request_id: str) -> str | None:
        conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=timeout)
        try:
            try:
                conn.connect()
            finally:  # connected or not, release the others
                with contextlib.suppress(threading.BrokenBarrierError):
                    start.wait(timeout=BARRIER_S)
            return _post(conn, data, request_id)
        except (OSError, http.client.HTTPException) as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            conn.close()

    with ThreadPoolExecutor(max_workers=len(payloads)) as pool:
        return list(pool.map(one, payloads, ids))


def _post(conn: http.client.HTTPConnection, data: bytes, request_id: str) -> str | None:
    headers = {"Content-Type": "application/json", "X-Request-Id": request_id}
    conn.request("POST", PATH, body=data, headers=headers)
    response = conn.getresponse()
    text = response.read()
    if response.status >= 400:
        return f"HTTP {response.status}: {text[:300].decode('utf-8', 'replace')}"
    try:
        payload = json.loads(text.decode("utf-8"))
    except ValueError as exc:
        return f"{type(exc).__name__}: {exc}"
    choices = payload.get("choices") if isinstance(payload, dict) else None
    return None if isinstance(choices, list) and choices else "response without choices"
