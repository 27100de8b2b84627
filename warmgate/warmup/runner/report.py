"""The versioned JSON report, the <= 4 KiB termination summary and the operator's progress lines."""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from warmgate.contract.order import DIGEST_ALGORITHM
from warmgate.contract.summary import (
    SUMMARY_VERSION,
    EngineKind,
    ShardReport,
    TerminationSummary,
)
from warmgate.warmup.engine.parse import EngineLog
from warmgate.warmup.runner.direct_check import DirectCheck
from warmgate.warmup.runner.drafter_check import DrafterCheck
from warmgate.warmup.runner.outcomes import Outcome
from warmgate.warmup.runner.probe import ProbeResult
from warmgate.warmup.runner.sweep import SweepRun
from warmgate.warmup.runner.verdict import LogVerdict
from warmgate.warmup.statusboard import Board

# The report and the termination summary share their version (contract/summary.py).
# 2: engine_log.omitted records, list_copies, unreadable (issue 12); 3: drafter (issue 16);
# 4: known_gaps (the plan's known-unwarmable shapes the engine logged, reported, not failed);
# 5: engine kind (cpu_engine, issue 21), the report's `code` beside the process `exit_code`;
# 6: drafter driven, missing, warmup_ran, step attempts and times, retried (issue 25);
# 7: drafter_warmup, the engine plugin's direct drafter warmup, every shape (issue 33)
REPORT_VERSION = SUMMARY_VERSION
PROGRESS_PREFIX = "warmgate-progress"


@dataclass
class RunRecord:
    """Everything one run learnt, filled in as it goes."""

    plan_id: str = ""
    plan_hash: str = ""
    cache_key: str = ""
    outcome: Outcome = Outcome.INTERNAL_ERROR
    reason: str = ""
    facts: dict[str, Any] | None = None
    log: EngineLog | None = None
    verdict: LogVerdict | None = None
    unwarmed: list[str] = field(default_factory=list)
    known_gaps: list[str] = field(default_factory=list)
    probe: ProbeResult | None = None
    cache: dict[str, Any] = field(default_factory=dict)
    kv_blocks_expected: int | None = None
    engine_argv: list[str] = field(default_factory=list)
    engine_exit_code: int | None = None
    timings: dict[str, float] = field(default_factory=dict)
    sweep: SweepRun | None = None
    probe_began: float | None = None
    drafter: DrafterCheck | None = None
    # The engine that ran: a CPU build or Gaudi, its vLLM version and platform (cpu_mode)
    engine_kind: EngineKind | None = None
    # The engine plugin's direct drafter warmup (None: the plan asked for none)
    direct: DirectCheck | None = None
    # A sharded warmup's run (issue 38): the plan's shard section, with the merge's count of
    # slices merged and, for the merge, the outcome of this Pod's own slice (None: unsharded)
    shard: dict[str, Any] | None = None


class Progress:
    """Writes `warmgate-progress <what> <done>/<total>` and `warmgate-progress stage <name>`,
    and keeps the latest of each on the status ``board`` the operator reads (statusboard.py)."""

    def __init__(self, out: TextIO | None = None, board: Board | None = None) -> None:
        self._out = out if out is not None else sys.stdout
        self._percent: dict[str, int] = {}
        self._board = board

    def count(self, what: str, done: int, total: int) -> None:
        """A counter line, e.g. ``warmgate-progress decode 57/143``, written when the whole
        percentage changes (at most ~100 lines per phase, even for 16 000 buckets)."""
        if self._board is not None:
            self._board.progress(what, done, total)
        percent = done * 100 // total if total > 0 else 100
        if self._percent.get(what) == percent and done != total:
            return
        self._percent[what] = percent
        self._write(f"{PROGRESS_PREFIX} {what} {done}/{total}")

    def stage(self, name: str) -> None:
        """A stage line, e.g. ``warmgate-progress stage probe``."""
        if self._board is not None:
            self._board.stage(name)
        self._write(f"{PROGRESS_PREFIX} stage {name}")

    def _write(self, line: str) -> None:
        self._out.write(line + "\n")
        self._out.flush()


def _log_section(log: EngineLog | None) -> dict[str, Any]:
    if log is None:
        return {}
    return {
        "warmup_finished": log.warmup_finished,
        "warmup_secs": log.warmup_secs,
        "warmup_allocated": log.warmup_allocated,
        "captured": log.captured,
        "progress": {k: list(v) for k, v in log.progress.items()},
        "flags": sorted(log.flags),
        "kv_blocks": log.kv_blocks,
        "bucket_lists": {k: [list(b) for b in v] for k, v in log.lists.items()},
        "list_copies": {
            k: {"readable_from": sorted(c.clean), "declared": c.declared, "unreadable": c.garbled}
            for k, c in log.copies.items()
        },
        "omitted": [
            {"phase": s.phase, "bucket": list(s.bucket), "condition": s.condition}
            for s in log.omitted
        ],
        "unwarmed": [{"config": u.text, "after_warmup": u.after_warmup} for u in log.unwarmed],
        "not_prepared": [vars(n) for n in log.not_prepared],
        "info_records": log.info_records,
        "processes": {name: sorted(pids) for name, pids in sorted(log.processes.items())},
        "problems": log.problems,
    }


def _burst_section(log: EngineLog | None) -> dict[str, Any]:
    """How the probe's and the sweep's bursts reached the scheduler: the engine hook's burst
    gate lines (hook/burst_gate.py). ``gated`` 0: no gate ran (no hook, or not vLLM v1)."""
    events = [e for e in log.hook_events if e.kind == "burst"] if log is not None else []
    incomplete = [e.fields for e in events if e.fields.get("whole") is not True]
    held = [e.fields.get("held_s") for e in events]
    return {
        "gated": len(events),
        "whole": len(events) - len(incomplete),
        "held_s_max": max((h for h in held if isinstance(h, (int, float))), default=0),
        "incomplete": incomplete[:20],
    }


def _probe_section(probe: ProbeResult | None) -> dict[str, Any] | None:
    if probe is None:
        return None
    return {
        "timed_out": probe.timed_out,
        "engine_exited": probe.engine_exited,
        "steps": [vars(s) for s in probe.steps],
    }


def _drafter_section(record: RunRecord) -> dict[str, Any] | None:
    """The compile hook's check and the sweep's run (None when the plan had neither)."""
    check, run = record.drafter, record.sweep
    if run is None and (check is None or check.hook == "off"):
        return None
    doc = check.to_json() if check is not None else {}
    if run is not None:
        doc["sweep"] = {
            "seconds": round(run.ended - run.began, 3),
            "steps_run": len(run.steps),
            "retried": run.retried,
            "skipped": run.skipped,
            "timed_out": run.timed_out,
            "engine_exited": run.engine_exited,
        }
        if not doc.get("steps"):
            doc["steps"] = [s.to_json() for s in run.steps]
    return doc


def build_report(record: RunRecord) -> dict[str, Any]:
    """The full report document (format in docs/runner.md, "Report")."""
    verdict = record.verdict
    return {
        "report_version": REPORT_VERSION,
        "outcome": record.outcome.label,
        "code": int(record.outcome),
        "exit_code": record.outcome.exit_code,
        "reason": record.reason,
        "plan_id": record.plan_id,
        "plan_hash": record.plan_hash,
        "cache_key": record.cache_key,
        "digest_algorithm": DIGEST_ALGORITHM,
        "facts": record.facts,
        "buckets": {c.name: c.to_json() for c in verdict.checks} if verdict else {},
        "mismatches": verdict.mismatches if verdict else [],
        "unreadable": verdict.unreadable if verdict else [],
        "unwarmed": record.unwarmed,
        "known_gaps": record.known_gaps,
        "kv_blocks_expected": record.kv_blocks_expected,
        "engine": {
            "argv": record.engine_argv,
            "exit_code": record.engine_exit_code,
            **(record.engine_kind.to_json() if record.engine_kind else {}),
        },
        "engine_log": _log_section(record.log),
        "probe": _probe_section(record.probe),
        "bursts": _burst_section(record.log),
        "drafter": _drafter_section(record),
        "drafter_warmup": record.direct.to_json() if record.direct is not None else None,
        "cache": record.cache,
        "shard": record.shard,
        "timings": record.timings,
        "written_unix": int(time.time()),
    }


def write_report(report: dict[str, Any], report_dir: Path, key: str) -> Path:
    """Write <report_dir>/<key>.json through a temporary name, so readers see whole files."""
    report_dir.mkdir(parents=True, exist_ok=True)
    path = report_dir / f"{key}.json"
    tmp = report_dir / f".{key}.json.{os.getpid()}.partial"
    tmp.write_text(json.dumps(report, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def summary(record: RunRecord, report_path: Path | None) -> str:
    """Compact JSON for /dev/termination-log, shrunk until it fits in SUMMARY_LIMIT bytes."""
    verdict = record.verdict
    return TerminationSummary(
        outcome=record.outcome.label,
        code=int(record.outcome),
        reason=record.reason,
        plan_hash=record.plan_hash,
        key=record.cache_key,
        unwarmed=tuple(record.unwarmed),
        known_gaps=tuple(record.known_gaps),
        mismatches=tuple(verdict.mismatches) if verdict else (),
        unreadable=tuple(verdict.unreadable) if verdict else (),
        kv_blocks=record.log.kv_blocks if record.log else None,
        cache=record.cache.get("status"),
        report=str(report_path) if report_path else None,
        drafter=(
            record.drafter.summary()
            if _drafter_section(record) is not None and record.drafter is not None
            else None
        ),
        engine=record.engine_kind,
        drafter_warmup=record.direct.counts() if record.direct is not None else None,
        shard=ShardReport.from_json(record.shard),
    ).to_json()


def write_termination_log(path: Path, text: str) -> str | None:
    """Write the summary; returns an error description instead of raising (best effort)."""
    try:
        with path.open("w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    return None
