"""The runner on Python 3.10, the oldest interpreter a vLLM-Gaudi image may ship."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from runner_harness import make_plan, run_runner, stdlib_tree

from warmgate.warmup.runner.outcomes import Outcome


def candidates() -> list[str]:
    """$WARMGATE_PY310, pyenv installs, then python3.10 on PATH (a pyenv shim may not work)."""
    found = [os.environ.get("WARMGATE_PY310", "")]
    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    found += [str(p) for p in sorted(root.glob("versions/3.10*/bin/python3.10"))]
    found.append(shutil.which("python3.10") or "")
    return [c for c in found if c]


def is_310(python: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", "import sys; print(sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == "(3, 10)"


@pytest.fixture(scope="module")
def py310() -> str:
    for python in candidates():
        if is_310(python):
            return python
    pytest.skip(f"no working Python 3.10 interpreter among {candidates()} (set WARMGATE_PY310)")


def test_every_runner_module_compiles_and_imports_on_310(py310: str, tmp_path: Path) -> None:
    tree = stdlib_tree(tmp_path / "tree")
    script = (
        "import importlib, pathlib\n"
        "for p in sorted(pathlib.Path('warmgate/warmup').glob('*.py')):\n"
        "    importlib.import_module('warmgate.warmup.' + p.stem)\n"
    )
    done = subprocess.run(
        [py310, "-S", "-E", "-c", script],
        cwd=tree,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_verified_run_on_310(py310: str, tmp_path: Path) -> None:
    result = run_runner(tmp_path, make_plan(tmp_path, k=1), python=py310)
    assert result.code == int(Outcome.VERIFIED), result.stderr[-3000:]
    assert result.summary["outcome"] == "verified"
    assert result.report()["facts"]["python"].startswith("3.10.")


@pytest.mark.slow
def test_unwarmed_run_on_310(py310: str, tmp_path: Path) -> None:
    result = run_runner(
        tmp_path, make_plan(tmp_path, k=1), faults="unwarmed_on_probe", python=py310
    )
    assert result.code == int(Outcome.UNWARMED_SHAPES), result.stderr[-3000:]
