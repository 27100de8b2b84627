"""Reads the runners' status endpoints through the Pod IP (progress, serving drift): plain HTTP.

The warmup and serving Pods have no API rights; their runner answers ``GET /warmgate/status``
on the container port named `warmgate-status` (docs/operator.md, "How progress and drift
reach the operator"). A Pod that does not answer within the timeout is skipped this sync.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Final

from warmgate.api import Manifest
from warmgate.reconcile.progress import STATUS_PORT_NAME
from warmgate.warmup.statusboard import STATUS_PATH

TIMEOUT_S: Final = 2.0
MAX_BYTES: Final = 1024 * 1024
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


class HttpRunnerEndpoints:
    """`warmgate.reconcile.progress.RunnerEndpoints` over HTTP."""

    def read(self, pod: Manifest) -> dict[str, Any] | None:
        """The runner's document, or None when the Pod has no endpoint or does not answer."""
        url = status_url(pod)
        if url is None:
            return None
        try:
            with _OPENER.open(url, timeout=TIMEOUT_S) as response:
                doc = json.loads(response.read(MAX_BYTES))
        except (OSError, ValueError, urllib.error.URLError):
            return None
        return doc if isinstance(doc, dict) else None
