"""The drafter sweep: after the engine's warmup, requests that make the drafter compile its graphs.

vllm-gaudi's warmup never runs the drafter on a decode bucket (docs/coverage.md, "Drafter
graphs"), so the operator plans server requests that surely make it run each unwarmed drafter
graph (``warmgate.buckets.drafter.sweep``). The runner sends them through the running server,
one step at a time: ``concurrency`` completions at once, each of ``prompt_tokens`` token ids
that are pseudo-random and distinct per step and request (no prefix-cache hit, reruns repeat),
``max_tokens`` = ``min_tokens``, the document's temperature and ``ignore_eos``. A step starts
only when every request of the previous one has returned: the sweep's first assumption is an
idle server at each step's start. The graphs compile inside the Job and land in its recipe
cache; the compile hook (``enginehook``) tells which (``drafter_check``).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.sweepplan import SweepSpec, SweepStepSpec
from warmgate.warmup.runner.burst import send_burst

Alive = Callable[[], bool]
Progress = Callable[[int, int], None]


@dataclass
class SweepStepRun:
    """How one sweep step went; ``began``/``ended`` are wall-clock seconds (the hook's clock)."""

    name: str
    sent: int
    ok: int
    began: float
    ended: float
    errors: list[str] = field(default_factory=list)
    attempt: int = 0  # 1 for the retry of a step whose planned graphs never ran

    def to_json(self) -> dict[str, Any]:
        """Plain dict for the report."""
        return {
            "name": self.name,
            "attempt": self.attempt,
            "sent": self.sent,
            "ok": self.ok,
            "errors": self.errors,
            "began": self.began,
            "ended": self.ended,
            "seconds": round(self.ended - self.began, 3),
        }


@dataclass
class SweepRun:
    """The whole sweep; ``skipped`` names the steps the sweep deadline left out, ``retried`` the
    steps sent again because a graph they plan never ran (``drafter_check.missing_steps``)."""

    began: float
    ended: float = 0.0
    steps: list[SweepStepRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    timed_out: bool = False
    engine_exited: bool = False
    retried: list[str] = field(default_factory=list)

    def extend(self, retry: SweepRun) -> None:
        """Append a retry's steps, skips and end to this run."""
        self.steps += retry.steps
        self.skipped += retry.skipped
        self.timed_out = self.timed_out or retry.timed_out
        self.engine_exited = self.engine_exited or retry.engine_exited
        self.retried += [s.name for s in retry.steps]
        self.ended = retry.ended

    @property
    def failures(self) -> list[str]:
        """Every request error, prefixed by its step name."""
        return [f"{s.name}: {e}" for s in self.steps for e in s.errors]


def sweep_prompt(step: SweepStepSpec, index: int, lo: int, hi: int, attempt: int = 0) -> list[int]:
    """Token ids of request ``index`` of ``step``: a pseudo-random walk seeded by the step's
    name, the index and the attempt, so no two requests of a sweep share a prefix block (a
    retried step hits no block its first attempt cached), and reruns repeat."""
    span = hi - lo + 1
    seed = (
        zlib.crc32(f"{step.name}#{attempt}".encode()) if attempt else zlib.crc32(step.name.encode())
    )
    state = (seed * 2654435761 + index * 40503 + 1) % 2**31
    ids = []
    for _ in range(step.prompt_tokens):
        state = (state * 1103515245 + 12345) % 2**31
        ids.append(lo + (state >> 7) % span)
    return ids


def _body(
    model: str,
    sweep: SweepSpec,
    step: SweepStepSpec,
    index: int,
    ids: tuple[int, int],
    *,
    attempt: int = 0,
) -> dict[str, Any]:
    return {
        "model": model,
        "prompt": sweep_prompt(step, index, *ids, attempt=attempt),
        "max_tokens": step.max_tokens,
        "min_tokens": step.max_tokens,
        "temperature": sweep.temperature,
        "ignore_eos": sweep.ignore_eos,  # vLLM extension: each request decodes max_tokens tokens
    }


def run_sweep(
    base_url: str,
    model: str,
    sweep: SweepSpec,
    *,
    token_ids: tuple[int, int],
    request_timeout_s: float,
    deadline: float,
    alive: Alive,
    progress: Progress,
    attempt: int = 0,
) -> SweepRun:
    """Send the steps in order, each as one burst; stop at ``deadline`` (monotonic) or when the
    engine exits, and name the steps left out. ``attempt`` > 0 sends fresh prompts (a retry)."""
    run = SweepRun(began=time.time())
    for number, step in enumerate(sweep.steps):
        if time.monotonic() >= deadline:
            run.timed_out = True
        elif not alive():
            run.engine_exited = True
        if run.timed_out or run.engine_exited:
            run.skipped = [s.name for s in sweep.steps[number:]]
            break
        timeout = max(0.1, min(request_timeout_s, deadline - time.monotonic()))
        bodies = [
            _body(model, sweep, step, i, token_ids, attempt=attempt)
            for i in range(step.concurrency)
        ]
        began = time.time()
        errors = [e for e in send_burst(base_url, bodies, timeout) if e is not None]
        sent, ended = len(bodies), time.time()
        run.steps.append(
            SweepStepRun(step.name, sent, sent - len(errors), began, ended, errors[:20], attempt)
        )
        progress(number + 1, len(sweep.steps))
        if errors:  # the server failed a request: the outcome is decided, stop sending
            run.skipped = [s.name for s in sweep.steps[number + 1 :]]
            break
    run.ended = time.time()
    return run
