"""The runner's CPU-engine path, decided from facts and the log (warmup/runner/cpu_mode.py).

The real CPU engine runs it end to end in tests/realengine/test_runner_real.py; here the
decisions alone, on made-up facts and logs.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from runner_harness import make_plan

from warmgate.contract.order import parse_plan
from warmgate.warmup.engine.facts import EngineFacts
from warmgate.warmup.engine.parse import EngineLog
from warmgate.warmup.hook.lines import HookEvent
from warmgate.warmup.runner import cpu_mode
from warmgate.warmup.runner.drafter_check import DrafterCheck
from warmgate.warmup.runner.outcomes import Outcome
from warmgate.warmup.runner.probe import ProbeResult, StepResult
from warmgate.warmup.runner.report import RunRecord

CPU = EngineFacts("3.11", "2.13.0", None, "0.32.0", None, None, None, None, {}, platform="cpu")
UNKNOWN = dataclasses.replace(CPU, platform=None, vllm=None)


def test_a_cpu_engine_is_named_in_its_refusal(tmp_path: Path) -> None:
    plan = parse_plan(make_plan(tmp_path))
    refusal = cpu_mode.refusal(CPU, plan)
    assert refusal is not None
    assert "CPU build of vLLM (0.32.0, platform cpu)" in refusal
    assert "spec.engine.acceptCPUEngine" in refusal
    # without a platform the Gaudi rule decides, as before: no countable HPU, device required
    gaudi = dataclasses.replace(plan, require_device=True)
    assert "cannot count HPUs" in (cpu_mode.refusal(UNKNOWN, gaudi) or "")
    assert cpu_mode.refusal(UNKNOWN, dataclasses.replace(plan, require_device=False)) is None


def test_the_engine_kind_follows_vllms_platform() -> None:
    assert cpu_mode.engine_kind(CPU).to_json() == {
        "kind": "cpu",
        "vllm": "0.32.0",
        "platform": "cpu",
    }
    hpu = dataclasses.replace(CPU, platform="hpu")
    assert cpu_mode.engine_kind(hpu).kind == "gaudi"
    assert cpu_mode.engine_kind(UNKNOWN).kind == "gaudi"


def _record() -> RunRecord:
    record = RunRecord(engine_kind=cpu_mode.engine_kind(CPU))
    record.probe = ProbeResult(steps=[StepResult("a", 2, 2), StepResult("b", 1, 1)])
    return record


def _log(info: int = 40, pids: tuple[int, ...] = (100, 200)) -> EngineLog:
    log = EngineLog(info_records=info)
    log.hook_events = [HookEvent("loaded", p, 1.0, {"gaudi": False}) for p in pids]
    return log


def test_a_cpu_run_ends_cpu_engine_and_says_what_it_did_not_verify() -> None:
    check = DrafterCheck(hook="not-attached", reason="vllm_gaudi is not installed ...")
    outcome, reason = cpu_mode.decide(_record(), _log(), check)
    assert outcome is Outcome.CPU_ENGINE
    assert reason.startswith("CPU engine (vLLM 0.32.0): started with the plan's command line")
    assert "served 0 sweep step(s) and 2 probe step(s), 40 INFO record(s) read" in reason
    assert cpu_mode.NOT_VERIFIED in reason
    assert reason.endswith(
        "compile hook loaded by 2 engine process(es), not attached: vllm_gaudi is not installed ..."
    )
    assert (Outcome.CPU_ENGINE.label, int(Outcome.CPU_ENGINE)) == ("cpu_engine", 12)
    assert Outcome.CPU_ENGINE.exit_code == 0  # the Job completes; the outcome says the rest
    assert Outcome.UNWARMED_SHAPES.exit_code == 3


def test_an_unreadable_log_or_an_unwarmed_line_still_fails_a_cpu_run() -> None:
    off = DrafterCheck()
    outcome, reason = cpu_mode.decide(_record(), _log(info=0), off)
    assert (outcome, reason) == (Outcome.PLAN_MISMATCH, cpu_mode.NO_INFO)
    record = _record()
    record.unwarmed = ["Configuration: ('decode', 4, 1, 8) was not warmed-up!"]
    assert cpu_mode.decide(record, _log(), off)[0] is Outcome.UNWARMED_SHAPES
    assert cpu_mode.hook_line(off, []) == "compile hook: not installed (the plan has none)"
