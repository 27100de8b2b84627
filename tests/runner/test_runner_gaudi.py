"""The runner against a real vLLM-Gaudi engine: only on a Gaudi machine, skipped elsewhere."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from support.paths import REPO_ROOT

from warmgate.warmup.runner.outcomes import Outcome


@pytest.mark.gaudi
def test_real_engine_warmup_verifies() -> None:
    plan = os.environ.get("WARMGATE_GAUDI_PLAN")
    if importlib.util.find_spec("habana_frameworks") is None:
        pytest.skip("needs Intel Gaudi: habana_frameworks is not installed on this machine")
    if not plan:
        pytest.skip("needs WARMGATE_GAUDI_PLAN: a plan.json for a real `vllm serve` on Gaudi")
    done = subprocess.run(
        [sys.executable, "-m", "warmgate.warmup", "--plan", plan],
        cwd=REPO_ROOT,
        check=False,
        timeout=4 * 3600,
    )
    assert done.returncode == int(Outcome.VERIFIED)
