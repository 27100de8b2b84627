"""kubectl against the test control plane: submit a manifest as the user would, strictly."""

from __future__ import annotations

import json
import subprocess
from typing import Any

from warmgate.devcluster.controlplane import ControlPlane


def submit(
    cp: ControlPlane,
    namespace: str,
    manifest: dict[str, Any],
    *verb: str,
    as_json: bool = True,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """`kubectl VERB --validate=strict -n NAMESPACE [-o json] -f -` with ``manifest`` on stdin,
    e.g. ``submit(cp, ns, doc, "create", "--dry-run=server")``."""
    output = ("-o", "json") if as_json else ()
    return cp.kubectl(
        *verb, "--validate=strict", "-n", namespace, *output, "-f", "-",
        stdin=json.dumps(manifest), check=check,
    )  # fmt: skip
