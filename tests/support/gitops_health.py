"""warmgate's GitOps health files (deploy/gitops/) and the helper that reads objects with them.

`warmgate-health` (hack/gitops-health/, built by `hack/provision-gitops-health.sh`, part of
`make test`, into .cache/gitops-health/ or $GITOPS_HEALTH_DIR) reads each object with the real
readers: kstatus (sigs.k8s.io/cli-utils status.Compute), Flux's health expressions through
Flux's own CEL status reader (github.com/fluxcd/pkg/runtime/cel), and Argo CD's health Lua in
gopher-lua set up as Argo CD sets up a VM. Without the helper the tests that run it skip with
the command that builds it; under `CI=true` they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.paths import REPO_ROOT

GITOPS = REPO_ROOT / "deploy" / "gitops"
FLUX_EXPRS = GITOPS / "flux" / "healthcheckexprs.yaml"
ARGO_CM = GITOPS / "argocd" / "argocd-cm.yaml"
ARGO_DIR = GITOPS / "argocd" / "resource_customizations" / "warmgate.dev" / "SpecDecodeDeployment"
HEALTH_LUA = ARGO_DIR / "health.lua"
HEALTH_TESTS = ARGO_DIR / "health_test.yaml"
ARGO_CM_KEY = "resource.customizations.health.warmgate.dev_SpecDecodeDeployment"

# The documented meaning (docs/operator.md, "GitOps health"), as each reader names it.
MEANING: dict[str, dict[str, str]] = {
    "Current": {"kstatus": "Current", "flux": "Current", "argo": "Healthy"},
    "Failed": {"kstatus": "Failed", "flux": "Failed", "argo": "Degraded"},
    "InProgress": {"kstatus": "InProgress", "flux": "InProgress", "argo": "Progressing"},
}


def helper() -> Path:
    """The built warmgate-health, or a skip (a failure under CI) that names how to build it."""
    folder = Path(os.environ.get("GITOPS_HEALTH_DIR") or REPO_ROOT / ".cache" / "gitops-health")
    binary = folder / "warmgate-health"
    if binary.is_file() and os.access(binary, os.X_OK):
        return binary
    reason = (
        f"no warmgate-health at {binary}: run `bash hack/provision-gitops-health.sh` "
        "(`make gitops-health`, part of make test)"
    )
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"the GitOps health tests need the helper under CI: {reason}")
    pytest.skip(reason)


def read_files(
    files: list[Path], flux: Path = FLUX_EXPRS, lua: Path = HEALTH_LUA
) -> list[dict[str, Any]]:
    """Each file's readings: {"kstatus", "flux", "argo"}, each {"status", "message", "error"}."""
    argv = [str(helper()), "--flux", str(flux), "--argo", str(lua), *map(str, files)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60)
    return [json.loads(line) for line in done.stdout.splitlines()]


def read(obj: dict[str, Any], folder: Path) -> dict[str, Any]:
    """One object's readings (written to ``folder`` for the helper)."""
    path = folder / f"{obj['metadata']['name']}.yaml"
    path.write_text(yaml.safe_dump(obj), encoding="utf-8")
    (reading,) = read_files([path])
    return reading


def statuses(reading: dict[str, Any]) -> dict[str, str]:
    """The three statuses of one reading (an error as "error: ...")."""
    return {
        who: reading[who].get("status") or f"error: {reading[who].get('error')}"
        for who in ("kstatus", "flux", "argo")
    }
