"""`make help` lists every target of the Makefile, each with one line (issue 26 item 5)."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from support.paths import REPO_ROOT

MAKEFILE = REPO_ROOT / "Makefile"


def _phony() -> list[str]:
    """The names of `.PHONY:`, across its continuation lines."""
    text = MAKEFILE.read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith(".PHONY:"))
    return line.split(":", 1)[1].split()


def test_make_help_lists_every_target_once_with_one_line() -> None:
    if shutil.which("make") is None:
        pytest.skip("no make on this machine")
    done = subprocess.run(
        ["make", "--no-print-directory", "-C", str(REPO_ROOT), "help"],
        capture_output=True,
        text=True,
        check=True,
    )
    rows = [re.match(r"  (\S+)\s+(\S.*)$", line) for line in done.stdout.splitlines()]
    assert all(rows), done.stdout
    listed = [m.group(1) for m in rows if m]
    assert sorted(listed) == sorted(_phony())
    assert len(set(listed)) == len(listed)
    assert listed[1:3] == ["run", "test"]  # the README's two commands first, after help
    assert all(len(line) <= 110 for line in done.stdout.splitlines())
