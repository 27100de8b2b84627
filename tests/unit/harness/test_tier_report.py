"""The tiers' table of a pytest run (tests/support/tier_report.py) counts what pytest ran."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from support.tier_report import TierFigures, join, table_lines

TESTS_DIR = Path(__file__).resolve().parents[2]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(TESTS_DIR)!r})
from support import tier_report

def pytest_configure(config):
    config.addinivalue_line("markers", "integration: a tier marker")
    tier_report.register(config)
"""

TESTS = """
import pytest

@pytest.fixture
def breaks_on_teardown():
    yield
    raise RuntimeError("teardown")

def test_passes():
    pass

def test_teardown_fails(breaks_on_teardown):
    pass

@pytest.mark.integration
def test_skips():
    pytest.skip("no apiserver here")

@pytest.mark.integration
def test_fails():
    assert False
"""


def test_a_run_reports_each_tier_with_its_outcomes(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_some.py").write_text(textwrap.dedent(TESTS))
    report = tmp_path / "tiers.json"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", str(tmp_path)],
        check=False,
        cwd=tmp_path,
        env={"WARMGATE_TIER_REPORT": str(report), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    figures = json.loads(report.read_text())
    # Outside tests/ an unmarked test is in the tier "other"; a failed teardown fails its test.
    assert {k: {f: v for f, v in d.items() if f != "seconds"} for k, d in figures.items()} == {
        "integration": {"tests": 2, "passed": 0, "failed": 1, "skipped": 1},
        "other": {"tests": 2, "passed": 1, "failed": 1, "skipped": 0},
    }
    table = done.stdout.split(" tiers ")[-1].lstrip("=\n")
    assert table.split()[:6] == ["tier", "tests", "passed", "failed", "skipped", "minutes"]


def test_two_runs_join_into_one_table() -> None:
    rest = {"unit": {"tests": 3, "passed": 3, "failed": 0, "skipped": 0, "seconds": 60.0}}
    node = {
        "e2e": {"tests": 2, "passed": 1, "failed": 0, "skipped": 1, "seconds": 600.0},
        "unit": {"tests": 1, "passed": 1, "failed": 0, "skipped": 0, "seconds": 6.0},
    }
    joined = join([rest, node])
    assert joined == {
        "e2e": TierFigures(tests=2, passed=1, skipped=1, seconds=600.0),
        "unit": TierFigures(tests=4, passed=4, seconds=66.0),
    }
    lines = table_lines(joined)
    assert lines[0].split() == ["tier", "tests", "passed", "failed", "skipped", "minutes"]
    assert lines[1].split() == ["e2e", "2", "1", "0", "1", "10.0"]
    assert lines[-1].split() == ["all", "6", "5", "0", "1", "11.1"]
