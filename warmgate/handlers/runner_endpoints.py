"""Reads the runners' status endpoints through the Pod IP (progress, serving drift): plain HTTP.

The warmup and serving Pods have no API rights; their runner answers ``GET /warmgate/status``
on the container port named `warmgate-status` (docs/operator.md, "How progress and drift
reach the operator"). A Pod that does not answer within the timeout is skipped this sync.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.reconcile.progress import STATUS_PORT_NAME
from warmgate.warmup.wire.board import STATUS_PATH, RunnerBoard, read_board
from warmgate.warmup.wire.schema import DocumentError, decode, depth

__all__ = ["RunnerDocError", "depth", "parse_board", "parse_doc", "status_url"]

TIMEOUT_S: Final = 2.0
# A runner's document is a few KiB: more, or deeper nesting, is not a runner's.
MAX_BYTES: Final = 64 * 1024
MAX_DEPTH: Final = 8
# Pod IPs are never reached through a proxy, whatever the operator's environment says.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def status_url(pod: Manifest) -> str | None:
    """http://<podIP>:<port named warmgate-status>/warmgate/status, or None."""
    ip = (pod.get("status") or {}).get("podIP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == STATUS_PORT_NAME and ip:
                host = f"[{ip}]" if ":" in ip else ip
                return f"http://{host}:{int(port['containerPort'])}{STATUS_PATH}"
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
    """`warmgate.handlers.gather.RunnerEndpoints` over HTTP."""

    def read(self, pod: Manifest) -> RunnerBoard | None:
        """The runner's board; None when the Pod has no endpoint or does not answer.
        RunnerDocError when what it answers is no runner's board."""
        url = status_url(pod)
        if url is None or (pod.get("spec") or {}).get("hostNetwork"):
            return None  # a Pod on the node's network would point the operator at the node
        try:
            with _OPENER.open(url, timeout=TIMEOUT_S) as response:
                text = response.read(MAX_BYTES + 1)
        except (OSError, urllib.error.URLError):
            return None
        return parse_board(text)
