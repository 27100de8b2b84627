"""Per-tier figures of one pytest run: tests, passed, failed, skipped and minutes for each tier.

A tier is the marker a test carries (``realengine``, ``e2e``, ``integration``: the markers that
decide where ``make test`` runs it) or else its folder under ``tests/`` (``unit``, ``runner``).
The minutes are the tier's tests' setup, call and teardown added up: one pytest process runs
its tests one after the other, so that is the tier's wall time in the run, module fixtures
(a control plane, an engine) included. The table closes the terminal summary; with
``WARMGATE_TIER_REPORT`` set, the same figures are written there as JSON, and
``hack/tier-table.py`` joins the two runs of ``make test`` into one closing table.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

REPORT_ENV = "WARMGATE_TIER_REPORT"
PLUGIN_NAME = "warmgate-tier-report"
MARKED_TIERS = ("realengine", "e2e", "integration")
TESTS_DIR = Path(__file__).resolve().parents[1]


@dataclass
class TierFigures:
    """What one tier of one run counted."""

    tests: int = 0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    seconds: float = 0.0


def tier_of(item: pytest.Item) -> str:
    """The tier a test belongs to: its tier marker, else its folder under tests/."""
    for mark in MARKED_TIERS:
        if item.get_closest_marker(mark) is not None:
            return mark
    try:
        return Path(item.path).resolve().relative_to(TESTS_DIR).parts[0]
    except ValueError:
        return "other"


# Which outcome a test ends with when its phases disagree: a failed teardown fails a passed test.
_RANK = {"passed": 0, "skipped": 1, "failed": 2}


class TierReport:
    """The pytest plugin: the tier of every collected test, then its phases' outcomes and time."""

    def __init__(self) -> None:
        self.tier: dict[str, str] = {}
        self.outcome: dict[str, str] = {}
        self.seconds: dict[str, float] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        # trylast: after the tiers' own conftests have added their markers.
        self.tier = {item.nodeid: tier_of(item) for item in items}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        nodeid = report.nodeid
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + report.duration
        outcome = "skipped" if hasattr(report, "wasxfail") else report.outcome
        if report.when != "call" and outcome == "passed":
            return  # a passing setup or teardown says nothing about the test
        before = self.outcome.get(nodeid)
        if before is None or _RANK[outcome] > _RANK[before]:
            self.outcome[nodeid] = outcome

    def figures(self) -> dict[str, TierFigures]:
        tiers: dict[str, TierFigures] = {}
        for nodeid, outcome in self.outcome.items():
            one = tiers.setdefault(self.tier.get(nodeid, "other"), TierFigures())
            one.tests += 1
            setattr(one, outcome, getattr(one, outcome) + 1)
            one.seconds += self.seconds.get(nodeid, 0.0)
        return dict(sorted(tiers.items()))

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        figures = self.figures()
        if not figures:
            return
        terminalreporter.section("tiers")
        for line in table_lines(figures):
            terminalreporter.write_line(line)
        target = os.environ.get(REPORT_ENV)
        if target:
            doc = {name: asdict(one) for name, one in figures.items()}
            Path(target).write_text(json.dumps(doc, indent=1), encoding="utf-8")


def minutes(seconds: float) -> str:
    """``12.3`` minutes with one decimal, the table's unit."""
    return f"{seconds / 60:.1f}"


def table_lines(figures: dict[str, TierFigures]) -> list[str]:
    """The tiers as an aligned table, one line per tier and a total."""
    rows = [("tier", "tests", "passed", "failed", "skipped", "minutes")]
    total = TierFigures()
    for name, one in figures.items():
        rows.append((name, *_numbers(one)))
        for key in ("tests", "passed", "failed", "skipped", "seconds"):
            setattr(total, key, getattr(total, key) + getattr(one, key))
    rows.append(("all", *_numbers(total)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def _numbers(one: TierFigures) -> tuple[str, ...]:
    return (
        str(one.tests),
        str(one.passed),
        str(one.failed),
        str(one.skipped),
        minutes(one.seconds),
    )


def register(config: pytest.Config) -> None:
    """Adds the plugin to a run (tests/conftest.py's ``pytest_configure``)."""
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(TierReport(), PLUGIN_NAME)


def join(runs: list[dict[str, dict[str, float]]]) -> dict[str, TierFigures]:
    """The figures of several runs' JSON reports as one (a tier in two runs is added up)."""
    tiers: dict[str, TierFigures] = {}
    for run in runs:
        for name, doc in run.items():
            one = tiers.setdefault(name, TierFigures())
            for key in ("tests", "passed", "failed", "skipped", "seconds"):
                setattr(one, key, getattr(one, key) + type(getattr(one, key))(doc.get(key, 0)))
    return dict(sorted(tiers.items()))
