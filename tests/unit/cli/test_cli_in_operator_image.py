"""The operator image ships warmgate/ without what .dockerignore leaves out (the dev and test
infrastructure, warmgate/devcluster/): its CLI and its operator must load without it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from support.paths import REPO_ROOT


def left_out() -> list[str]:
    """The folders under warmgate/ that .dockerignore leaves out of the image's build context."""
    lines = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    folders = [line.strip() for line in lines if line.startswith("warmgate/")]
    return [
        f.removeprefix("warmgate/").rstrip("/") for f in folders if f.endswith("/") and "*" not in f
    ]


def image_package(dest: Path) -> Path:
    """warmgate/ as the Dockerfile copies it."""
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "warmgate", dest / "warmgate", ignore=skip)
    for folder in left_out():
        shutil.rmtree(dest / "warmgate" / folder)
    return dest


def run(tree: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``code`` with the copy first on the path and the dependencies, but without site's .pth
    files (-S): the checkout's editable install would hand out the repository's package."""
    paths = os.pathsep.join([str(tree), sysconfig.get_paths()["purelib"]])
    env = {**os.environ, "PYTHONPATH": paths}
    return subprocess.run(
        [sys.executable, "-S", "-c", code],
        env=env,
        cwd=tree,  # not the repository, whose own package would win
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_the_image_leaves_the_dev_infrastructure_out() -> None:
    assert "devcluster" in left_out()


def test_the_cli_and_the_operator_load_without_the_dev_infrastructure(tmp_path: Path) -> None:
    tree = image_package(tmp_path)
    code = (
        "import warmgate, warmgate.cli, warmgate.runtime.kopf_handlers\n"
        "warmgate.cli.build_parser()\n"
        "print(warmgate.__file__)\n"
    )
    done = run(tree, code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(tree / "warmgate" / "__init__.py")
    # Guard: the copy really lacks the package, so the check above means something.
    missing = run(tree, "import warmgate.devcluster")
    assert missing.returncode != 0
    assert "No module named 'warmgate.devcluster'" in missing.stderr
