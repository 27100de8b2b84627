"""Reads the runners' status endpoints through the Pod IP (progress, serving drift): plain HTTP.

The warmup and serving Pods have no API rights; their runner answers ``GET /warmgate/status``
on the container port named `warmgate-status` (docs/operator.md, "How progress and drift
reach the operator"). A Pod whose whole answer (connection, headers and body) does not arrive
within `DEADLINE_S` is skipped this sync: the deadline is for the answer, not per read, so a
Pod that drips one byte a second costs at most that long (issue 34 case 4).
"""

from __future__ import annotations

import contextlib
import http.client
import socket
import threading
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.contract.board import STATUS_PATH, RunnerBoard, read_board
from warmgate.contract.schema import DocumentError, decode, depth
from warmgate.reconcile.sync.progress import STATUS_PORT_NAME

__all__ = ["RunnerDocError", "depth", "parse_board", "parse_doc"]

TIMEOUT_S: Final = 2.0
# The whole answer's deadline: connecting, the headers and the body together.
DEADLINE_S: Final = 2.0
# A runner's document is a few KiB: more, or deeper nesting, is not a runner's.
MAX_BYTES: Final = 64 * 1024
MAX_DEPTH: Final = 8


def status_address(pod: Manifest) -> tuple[str, int] | None:
    """(podIP, the port named warmgate-status), or None."""
    ip = (pod.get("status") or {}).get("podIP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            number = port.get("containerPort")
            if port.get("name") == STATUS_PORT_NAME and ip and type(number) is int:
                return str(ip), number
    return None


RunnerDocError = DocumentError  # a runner's answer that is no runner document


def parse_doc(text: bytes) -> dict[str, Any]:
    """A runner's status document, bounded in size, depth and numbers; RunnerDocError
    otherwise (`schema.decode`)."""
    return decode(text, max_bytes=MAX_BYTES, max_depth=MAX_DEPTH)


def parse_board(text: bytes) -> RunnerBoard:
    """A runner's board (`read_board`) from its answer; RunnerDocError for any other document."""
    board = read_board(parse_doc(text))
    if board is None:
        raise RunnerDocError("not a runner's board: no known mode")
    return board


class HttpRunnerEndpoints:
    """`warmgate.runtime.gather.RunnerEndpoints` over HTTP (never through a proxy, whatever
    the operator's environment says: Pod IPs are reached directly)."""

    def __init__(self, deadline_s: float = DEADLINE_S) -> None:
        self.deadline_s = deadline_s

    def read(self, pod: Manifest) -> RunnerBoard | None:
        """The runner's board; None when the Pod has no endpoint or does not answer in time.
        RunnerDocError when what it answers is no runner's board."""
        address = status_address(pod)
        if address is None or (pod.get("spec") or {}).get("hostNetwork"):
            return None  # a Pod on the node's network would point the operator at the node
        text = fetch(*address, deadline_s=self.deadline_s)
        return None if text is None else parse_board(text)


def fetch(host: str, port: int, *, deadline_s: float = DEADLINE_S) -> bytes | None:
    """GET the status path within ``deadline_s`` for the whole answer, else None: a timer
    shuts the socket when the deadline passes, which ends a read in progress at once."""
    connection = http.client.HTTPConnection(host, port, timeout=min(TIMEOUT_S, deadline_s))
    late = threading.Event()

    def cut() -> None:
        late.set()
        sock = connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    timer = threading.Timer(deadline_s, cut)
    timer.daemon = True
    timer.start()
    try:
        connection.request("GET", STATUS_PATH, headers={"Accept": "application/json"})
        response = connection.getresponse()
        if response.status != 200:
            return None
        text = response.read(MAX_BYTES + 1)
    except (OSError, http.client.HTTPException, ValueError):
        return None
    finally:
        timer.cancel()
        connection.close()
    return None if late.is_set() else text
