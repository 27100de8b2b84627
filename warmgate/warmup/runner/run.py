"""One warmup run: facts, engine start, log watch, probe, clean stop, verdict, cache, report."""

from __future__ import annotations

import json
import shutil
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_ENV
from warmgate.contract.order import DEFAULT_SWEEP_S, WarmupOrder
from warmgate.contract.sweepplan import Graph, SweepSpec
from warmgate.warmup import cache
from warmgate.warmup.engine import facts
from warmgate.warmup.engine.launch import EngineProcess, Sink, echo, engine_argv, engine_env
from warmgate.warmup.engine.parse import LogParser
from warmgate.warmup.hook import install as hookenv
from warmgate.warmup.hook.burst_gate import BURST_GATE_ENV
from warmgate.warmup.runner import cpu_mode
from warmgate.warmup.runner.direct_check import check_direct
from warmgate.warmup.runner.drafter_check import (
    DIRECT,
    DrafterCheck,
    check_drafter,
    missing_steps,
)
from warmgate.warmup.runner.outcomes import Outcome, RunFailure
from warmgate.warmup.runner.probe import run_probe, wait_for_health
from warmgate.warmup.runner.report import (
    Progress,
    RunRecord,
    build_report,
    summary,
    write_report,
    write_termination_log,
)
from warmgate.warmup.runner.sweep import SweepRun, run_sweep
from warmgate.warmup.runner.verdict import (
    LogVerdict,
    decide,
    early_mismatches,
    final_verdict,
    known_gaps,
    unwarmed_reasons,
)

# The hook's lines are written before each response but read by another thread: before the
# missing graphs are counted, wait until none arrived for QUIET_S, at most SETTLE_S.
QUIET_S = 0.3
SETTLE_S = 3.0
# How often a sharded warmup's merge looks for the slices' entries.
MERGE_POLL_S = 1.0
# After failed requests, how long the engine has to be seen gone for them to count as its exit.
EXIT_SETTLE_S = 2.0
# The longest the hook's burst gate keeps a burst's first requests from the scheduler while its
# last ones are still on their way (hook/burst_gate.py): a whole burst goes in at once; a request
# that never comes costs its burst this much.
BURST_HOLD_S = 5.0


def _slice_name(key: str, keys: list[str]) -> str:
    """'slice 2 of 4 (key K)': the shard a cache key belongs to."""
    return f"slice {keys.index(key)} of {len(keys)} (key {key})"


class Runner:
    """Runs one plan to an outcome; ``run`` never raises for an expected failure."""

    def __init__(
        self, plan: WarmupOrder, progress: Progress, engine_echo: Sink | None = echo
    ) -> None:
        self.plan = plan
        self.progress = progress
        self.record = RunRecord(
            plan_id=plan.plan_id,
            plan_hash=plan.plan_hash,
            cache_key=plan.cache.key,
            kv_blocks_expected=plan.kv_blocks_expected,
            shard=plan.shard.to_json() if plan.shard is not None else None,
        )
        self.parser = LogParser(on_progress=progress.count)
        self.record.log = self.parser.state
        self._lock = threading.Lock()
        self._echo = engine_echo
        self._engine: EngineProcess | None = None
        self._decided = False
        # A CPU build of vLLM the plan accepts: no Gaudi checks, outcome cpu_engine (cpu_mode.py)
        self.cpu = False
        self._start = time.monotonic()
        self.deadline = self._start + plan.timeouts.total_s

    def run(self) -> RunRecord:
        """Run to the end and return the record (outcome, reason and every detail)."""
        try:
            self._steps()
        except RunFailure as exc:
            self._decide(exc.outcome, exc.reason)
        except Exception as exc:  # a runner bug must still stop the engine and report
            self._decide(Outcome.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
        finally:
            self._shutdown()
        self._conclude()
        self.record.timings["total_s"] = round(time.monotonic() - self._start, 3)
        return self.record

    def _decide(self, outcome: Outcome, reason: str) -> None:
        if not self._decided:
            self.record.outcome, self.record.reason, self._decided = outcome, reason, True

    def _timed(self, name: str, began: float) -> None:
        self.record.timings[name] = round(time.monotonic() - began, 3)

    def _steps(self) -> None:
        self._collect_facts()
        reuse = self._prepare_local()
        self._start_engine(reuse)
        self._await_health()
        if self.plan.shard is not None and not self.plan.shard.merge:
            return  # one slice (issue 38): the sweep and the probe need the whole plan
        self._sweep()
        self._probe()

    def _collect_facts(self) -> None:
        self.progress.stage("facts")
        began = time.monotonic()
        env = engine_env(self.plan, self.plan.work_dir / "buckets.txt", reuse_cache=False)
        timeout = max(1.0, min(self.plan.timeouts.facts_s, self.deadline - began))
        try:
            found = facts.collect(sys.executable, env, timeout)
        except facts.FactsError as exc:
            raise RunFailure(Outcome.ENGINE_FAILED, f"engine facts: {exc}") from exc
        finally:
            self._timed("facts_s", began)
        self.record.facts = found.to_json()
        self.cpu = found.cpu_engine and self.plan.accept_cpu_engine
        self.record.engine_kind = cpu_mode.engine_kind(found)
        refusal = None if self.cpu else cpu_mode.refusal(found, self.plan)
        if refusal is not None:
            raise RunFailure(Outcome.DEVICE_REFUSED, refusal)

    def _prepare_local(self) -> bool:
        """Write the seed file and restore a published cache; True when recipes were restored."""
        self.plan.work_dir.mkdir(parents=True, exist_ok=True)
        (self.plan.work_dir / "buckets.txt").write_text(self.plan.buckets.seed_file_text)
        spec = self.plan.cache
        shutil.rmtree(spec.local_dir, ignore_errors=True)
        if self.plan.shard is not None and self.plan.shard.merge:
            return self._merge_slices()
        restored = None
        if spec.reuse_existing:
            try:
                restored = cache.restore(spec.volume_dir, spec.key, spec.local_dir)
            except OSError as exc:  # an unreadable volume only costs the speed-up
                self.record.cache["restore_problems"] = [f"{exc}"]
        if restored is not None and not restored.problems:
            self.record.cache["restored_files"] = restored.files
            return True
        if restored is not None:
            self.record.cache["restore_problems"] = restored.problems
        spec.local_dir.mkdir(parents=True, exist_ok=True)
        return False

    def _merge_slices(self) -> bool:
        """Wait for every slice's entry, then merge them into ``local_dir`` (issue 38)."""
        shard, spec = self.plan.shard, self.plan.cache
        assert shard is not None
        self.progress.stage("merge")
        began = time.monotonic()
        keys = list(shard.keys(spec.key))
        deadline = min(self.deadline, began + shard.wait_s)
        if self.cpu:  # a CPU engine publishes no recipes: its slices' reports say they ran
            return self._await_cpu_slices(keys, deadline, began)
        while True:
            waiting = [k for k in keys if cache.find_published(spec.volume_dir, k) is None]
            self.progress.count("merge", len(keys) - len(waiting), len(keys))
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(min(MERGE_POLL_S, max(0.0, deadline - time.monotonic())))
        result = cache.merge(spec.volume_dir, keys, spec.local_dir)
        self._timed("merge_s", began)
        self.record.cache["merged"] = {
            "slices": len(keys) - len(result.missing),
            "files": result.files,
            "bytes": result.total_bytes,
            "shared": result.shared,
            "differing": result.differing,
        }
        if self.record.shard is not None:
            self.record.shard["merged"] = len(keys) - len(result.missing)
        if result.missing:
            names = ", ".join(_slice_name(k, keys) for k in result.missing)
            raise RunFailure(
                Outcome.SHARD_MISSING,
                f"{names} not published within {shard.wait_s:.0f} s: the merged cache would "
                "lack its graphs",
            )
        if result.problems:
            raise RunFailure(Outcome.SHARD_MISSING, f"merge: {result.problems[0]}")
        return True

    def _await_cpu_slices(self, keys: list[str], deadline: float, began: float) -> bool:
        """On a CPU engine (accepted): wait until every slice's report says ``cpu_engine``;
        nothing to merge (a CPU build compiles no graphs). Never makes the run verified."""

        def ran(key: str) -> bool:
            try:
                doc = json.loads((self.plan.report_dir / f"{key}.json").read_text())
            except (OSError, ValueError):
                return False
            return isinstance(doc, dict) and doc.get("outcome") == Outcome.CPU_ENGINE.label

        while True:
            waiting = [k for k in keys if not ran(k)]
            self.progress.count("merge", len(keys) - len(waiting), len(keys))
            if not waiting or time.monotonic() >= deadline:
                break
            time.sleep(min(MERGE_POLL_S, max(0.0, deadline - time.monotonic())))
        self._timed("merge_s", began)
        self.record.cache["merged"] = {"slices": len(keys) - len(waiting), "files": 0}
        if self.record.shard is not None:
            self.record.shard["merged"] = len(keys) - len(waiting)
        if waiting:
            names = ", ".join(_slice_name(k, keys) for k in waiting)
            raise RunFailure(Outcome.SHARD_MISSING, f"{names} did not report cpu_engine in time")
        self.plan.cache.local_dir.mkdir(parents=True, exist_ok=True)
        return False

    def _sink(self, text: str, stream: str) -> None:
        if self._echo is not None:
            self._echo(text, stream)
        with self._lock:
            self.parser.feed(text, stream)

    def _start_engine(self, reuse: bool) -> None:
        self.progress.stage("engine")
        argv = engine_argv(self.plan)
        env = engine_env(self.plan, self.plan.work_dir / "buckets.txt", reuse)
        if self.plan.drafter_hook.enabled:
            hookenv.hook_env(env, hookenv.install(self.plan.work_dir))
            env[BURST_GATE_ENV] = str(BURST_HOLD_S)  # bursts enter the scheduler whole
            if self.plan.drafter_warmup is not None:  # the plugin warms every planned shape
                path = self.plan.drafter_warmup.write(self.plan.work_dir)
                env[DRAFTER_WARMUP_ENV] = str(path)
        self.record.engine_argv = argv
        try:
            self._engine = EngineProcess(argv, env, self.plan.work_dir / "engine.log", self._sink)
        except OSError as exc:
            raise RunFailure(Outcome.ENGINE_FAILED, f"cannot start {argv[0]}: {exc}") from exc

    def _check_early(self) -> None:
        if not self.plan.buckets.abort_on_mismatch or self.cpu:
            return
        with self._lock:
            reasons = early_mismatches(self.plan, self.parser.state)
        if reasons:
            raise RunFailure(Outcome.PLAN_MISMATCH, reasons[0])

    def _await_health(self) -> None:
        began = time.monotonic()
        engine = self._require_engine()
        deadline = min(self.deadline, began + self.plan.timeouts.startup_s)
        state = wait_for_health(self._base_url(), deadline, engine.alive, check=self._check_early)
        self._timed("startup_s", began)
        if state == "exited":
            code = engine.proc.wait()
            raise RunFailure(Outcome.ENGINE_FAILED, f"engine exited with {code} before /health")
        if state == "timeout":
            raise RunFailure(Outcome.TIMED_OUT, "engine did not answer /health in time")
        self._check_early()

    def _sweep(self) -> None:
        """Drive the drafter sweep (docs/runner.md, "Drafter sweep and compile hook"), then once
        more the steps whose planned graphs the hook has not seen run (issue 25)."""
        sweep = self.plan.drafter_sweep
        if sweep is None or not sweep.steps:
            return
        self.progress.stage("sweep")
        began = time.monotonic()
        deadline = min(self.deadline, began + (self.plan.timeouts.sweep_s or DEFAULT_SWEEP_S))
        run = self._send_sweep(sweep, deadline, attempt=0)
        self.record.sweep = run
        self._sweep_failed(run)
        retry = self._missing_steps(sweep, run)
        if retry:
            self.progress.stage("sweep-retry")
            run.extend(self._send_sweep(retry, deadline, attempt=1))
            self._sweep_failed(run)
        self._timed("sweep_s", began)

    def _send_sweep(self, sweep: SweepSpec, deadline: float, attempt: int) -> SweepRun:
        engine = self._require_engine()
        probe = self.plan.probe
        what = "sweep" if attempt == 0 else "sweep-retry"
        return run_sweep(
            self._base_url(),
            self.plan.engine.served_model_name,
            sweep,
            token_ids=(probe.token_id_min, probe.token_id_max),
            request_timeout_s=probe.request_timeout_s,
            deadline=deadline,
            alive=engine.alive,
            progress=lambda done, total: self.progress.count(what, done, total),
            attempt=attempt,
        )

    def _sweep_failed(self, run: SweepRun) -> None:
        if run.engine_exited or self._engine_died(bool(run.failures)):
            raise RunFailure(Outcome.ENGINE_FAILED, "engine exited during the drafter sweep")
        if run.failures:
            first = run.failures[0]
            raise RunFailure(
                Outcome.PROBE_FAILED, f"drafter sweep: {len(run.failures)} failed: {first}"
            )

    def _missing_steps(self, sweep: SweepSpec, run: SweepRun) -> SweepSpec | None:
        """The sweep's steps that plan a graph the hook has not seen run yet (None: none, or
        the hook cannot tell)."""
        if not self.plan.drafter_hook.enabled or run.timed_out:
            return None
        self._settle_hook_lines()
        with self._lock:
            events = list(self.parser.state.hook_events)
        check = check_drafter(events, self.plan.drafter_hook, sweep, run, probe_began=None)
        names = set(missing_steps(check, sweep))
        if not names:
            return None
        return replace(sweep, steps=tuple(s for s in sweep.steps if s.name in names))

    def _settle_hook_lines(self) -> None:
        end = time.monotonic() + SETTLE_S
        with self._lock:
            seen = len(self.parser.state.hook_events)
        while time.monotonic() < end:
            time.sleep(QUIET_S)
            with self._lock:
                now = len(self.parser.state.hook_events)
            if now == seen:
                return
            seen = now

    def _probe(self) -> None:
        self.progress.stage("probe")
        began = time.monotonic()
        self.record.probe_began = time.time()  # the hook's clock: later compiles are unwarmed
        engine = self._require_engine()
        deadline = min(self.deadline, began + self.plan.timeouts.probe_s)
        result = run_probe(
            self._base_url(),
            self.plan.engine.served_model_name,
            self.plan.probe,
            deadline=deadline,
            alive=engine.alive,
            progress=lambda done, total: self.progress.count("probe", done, total),
        )
        self._timed("probe_s", began)
        self.record.probe = result
        if result.engine_exited or self._engine_died(bool(result.failures)):
            raise RunFailure(Outcome.ENGINE_FAILED, "engine exited during the probe")
        if result.timed_out:
            raise RunFailure(Outcome.TIMED_OUT, "probe did not finish in time")
        if result.failures:
            first = result.failures[0]
            raise RunFailure(Outcome.PROBE_FAILED, f"{len(result.failures)} failed: {first}")

    def _engine_died(self, requests_failed: bool) -> bool:
        """The engine has exited; after failed requests, within EXIT_SETTLE_S (they may have
        failed because it was dying: that is the engine's failure, not the probe's)."""
        return self._require_engine().exited_within(EXIT_SETTLE_S if requests_failed else 0.0)

    def _require_engine(self) -> EngineProcess:
        if self._engine is None:
            raise RunFailure(Outcome.INTERNAL_ERROR, "engine not started")
        return self._engine

    def _base_url(self) -> str:
        host = self.plan.engine.host
        host = "127.0.0.1" if host in ("0.0.0.0", "") else host
        return f"http://{host}:{self.plan.engine.port}"

    def _shutdown(self) -> None:
        """Stop the engine (always) and let the parser see the last of its output."""
        if self._engine is not None:
            self.progress.stage("stopping")
            began = time.monotonic()
            self.record.engine_exit_code = self._engine.stop(self.plan.timeouts.stop_grace_s)
            self._timed("stop_s", began)
        with self._lock:
            self.parser.close()

    def _conclude(self) -> None:
        if self._engine is None:  # refused or failed before the engine ran: nothing to read
            self.record.verdict = LogVerdict()
            return
        if self.cpu:
            self._conclude_cpu()
            return
        log, known = self.parser.state, self.plan.buckets.known_configs
        verdict = final_verdict(self.plan, log)
        self.record.verdict = verdict
        self.record.known_gaps = known_gaps(log, known)
        drafter = self._drafter(sum(1 for u in log.unwarmed if u.text in known))
        self.record.unwarmed = unwarmed_reasons(log, known) + drafter.unwarmed
        self._decide(*decide(verdict, self.record.unwarmed))
        if self.record.outcome is Outcome.VERIFIED and self.record.known_gaps:
            self.record.reason += (
                f"; {len(self.record.known_gaps)} known gap(s), shapes the plan lists as "
                f"unwarmable: {self.record.known_gaps[0]}"
            )
        drafted = drafter.hook != "off" or self.plan.drafter_sweep is not None
        if self.record.outcome is Outcome.VERIFIED and drafted:
            if self.plan.drafter_hook.required and not drafter.verified:
                # Fail closed (issue 33): the target verified, the drafter without evidence.
                self.record.outcome = Outcome.DRAFTER_UNVERIFIED
                self.record.reason = f"{drafter.line()}; target: {self.record.reason}"
            else:
                self.record.reason = f"{self.record.reason}; {drafter.line()}"
        if self.record.outcome is Outcome.VERIFIED:
            self._publish()

    def _conclude_cpu(self) -> None:
        """A CPU engine: what could be checked decides; never verified, nothing published."""
        log = self.parser.state
        self.record.verdict = LogVerdict()
        self.record.unwarmed = unwarmed_reasons(log)
        drafter = self._drafter(0)
        self._decide(*cpu_mode.decide(self.record, log, drafter))

    def _drafter(self, target_gaps: int) -> DrafterCheck:
        plan, record = self.plan, self.record
        events = self.parser.state.hook_events
        warmup_set: frozenset[Graph] = frozenset()
        if plan.drafter_warmup is not None and plan.drafter_hook.enabled:
            record.direct = check_direct(events, plan.drafter_warmup)
            warmup_set = frozenset(plan.drafter_warmup.shapes)  # each needs evidence
        check = check_drafter(
            events,
            plan.drafter_hook,
            plan.drafter_sweep,
            record.sweep,
            record.probe_began,
            unwarmable=plan.buckets.known_unwarmable,
            target_gaps=target_gaps,
        )
        if record.direct is not None:  # warmed directly counts as evidence; a failure never
            check.add_evidence(DIRECT, record.direct.warmed)
            check.direct_failed = len(record.direct.failed)
            check.failed_set = frozenset(record.direct.failed)
            check.warmup_set = warmup_set
        self.record.drafter = check
        return check

    def _publish(self) -> None:
        self.progress.stage("publish")
        began = time.monotonic()
        spec = self.plan.cache
        try:
            result = cache.publish(spec.local_dir, spec.volume_dir, spec.key, self._manifest_meta())
        except OSError as exc:
            self.record.outcome = Outcome.CACHE_FAILED
            self.record.reason = f"cache publication failed: {exc}"
            return
        finally:
            self._timed("publish_s", began)
        self.record.cache.update(status=result.status, path=str(result.path), detail=result.detail)
        self.record.cache.update(files=result.files, total_bytes=result.total_bytes)
        if result.status == "blocked":
            self.record.outcome = Outcome.CACHE_FAILED
            self.record.reason = f"cache key {spec.key}: {result.detail}"
            return
        if self.plan.shard is not None and self.plan.shard.merge:
            # The slices' entries are in the merged one now: they would only take retention
            # slots (a failed merge keeps them for the retry).
            removed = [
                k for k in self.plan.shard.keys(spec.key) if cache.remove(spec.volume_dir, k)
            ]
            self.record.cache["slices_removed"] = len(removed)
        self._prune()

    def _prune(self) -> None:
        """Housekeeping after a publication (cache.tidy): the verdict stands whatever it finds."""
        self.record.cache.update(cache.tidy(self.plan.cache, self.plan.report_dir))

    def _manifest_meta(self) -> dict[str, Any]:
        checks = self.record.verdict.checks if self.record.verdict else []
        return {
            "owner": self.plan.cache.owner,
            "owner_namespace": self.plan.cache.namespace,
            "plan_id": self.plan.plan_id,
            "plan_hash": self.plan.plan_hash,
            "engine_facts": self.record.facts,
            "kv_blocks": self.parser.state.kv_blocks,
            "bucket_digests": {c.name: c.observed_digest for c in checks},
        }


def finish(record: RunRecord, plan: WarmupOrder, progress: Progress) -> int:
    """Write the report and the termination summary; return the exit code."""
    report_path: Path | None = None
    try:
        report_path = write_report(build_report(record), plan.report_dir, plan.cache.key)
    except OSError as exc:
        print(f"warmgate: cannot write report: {exc}", file=sys.stderr)
    error = write_termination_log(plan.termination_log, summary(record, report_path))
    if error is not None:
        print(f"warmgate: {error}", file=sys.stderr)
    progress.stage(f"done {record.outcome.label}")
    return record.outcome.exit_code
