"""kstatus' verdict on an object, from the library itself (for assertions).

kstatus is sigs.k8s.io/cli-utils `pkg/kstatus/status.Compute` (kpt, and Flux for kinds without
health expressions), run by `warmgate-health` (tests/support/gitops_health.py; built by `make
gitops-health`). This used to be a Python copy of its generic rules; issue 39 replaced it with
the library, which also reads a status-less custom resource Current ("Resource is current").
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from support.gitops_health import read


def kstatus(obj: dict[str, Any]) -> str:
    """InProgress, Failed, Current or Terminating (the library's status names)."""
    with tempfile.TemporaryDirectory(prefix="kstatus-") as folder:
        reading = read(obj, Path(folder))["kstatus"]
    if "error" in reading:
        raise AssertionError(f"kstatus could not read the object: {reading['error']}")
    return str(reading["status"])
