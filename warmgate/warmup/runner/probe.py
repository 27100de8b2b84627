"""A bounded probe workload over vLLM's OpenAI-compatible HTTP API (bursts: burst.py)."""

from __future__ import annotations

import time
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from warmgate.contract.order import ProbeSpec, ProbeStep
from warmgate.warmup.runner.burst import send_burst

Alive = Callable[[], bool]
Progress = Callable[[int, int], None]
# The engine listens in the same pod: never route through an HTTP(S)_PROXY from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass
class StepResult:
    """How one probe step went."""

    name: str
    sent: int
    ok: int
    errors: list[str] = field(default_factory=list)
    began: float = 0.0  # wall clock, the hook's: which engine steps the step ran
    ended: float = 0.0


@dataclass
class ProbeResult:
    """The whole probe; ``timed_out`` means the probe deadline ended it early."""

    steps: list[StepResult] = field(default_factory=list)
    timed_out: bool = False
    engine_exited: bool = False

    @property
    def failures(self) -> list[str]:
        """Every request error, prefixed by its step name."""
        return [f"{s.name}: {e}" for s in self.steps for e in s.errors]


def wait_for_health(
    base_url: str,
    deadline: float,
    alive: Alive,
    check: Callable[[], None] = lambda: None,
    poll_s: float = 0.5,
) -> str:
    """Poll GET /health until 200: returns "ok", "exited" (engine died) or "timeout".

    ``check`` runs on every poll and may raise to stop waiting (e.g. on a plan mismatch)."""
    while time.monotonic() < deadline:
        if not alive():
            return "exited"
        check()
        if _healthy(base_url):
            return "ok"
        time.sleep(min(poll_s, max(0.0, deadline - time.monotonic())))
    return "timeout"


def _healthy(base_url: str) -> bool:
    try:
        with _OPENER.open(base_url + "/health", timeout=5) as response:
            return bool(response.status == 200)
    except (OSError, ValueError):
        return False


def prompt_ids(step: ProbeStep, index: int, lo: int, hi: int, position: int = 0) -> list[int]:
    """Token ids for request ``index`` of the probe's ``position``-th step; ids are sent
    directly, no tokenizer needed. "repeat" cycles 8 ids (n-gram drafters find matches, §5.1),
    "varied" walks a pseudo-random sequence (drafts are rejected, so partial drafts and varying
    accepted lengths occur).

    Both are drawn per step and request, so no probe prompt starts with a block another probe or
    sweep request cached: with prefix caching on (vLLM's default) a prompt seeded by its index
    alone shared its prefix with the same index of every earlier step, and a replay of a sweep
    step then ran other shapes than the step it replays (issue 25).
    """
    span = hi - lo + 1
    state = zlib.crc32(f"probe/{position}/{step.name}/{index}".encode())
    ids = []
    for _ in range(min(8, span) if step.token_pattern == "repeat" else step.prompt_tokens):
        state = (state * 1103515245 + 12345) % 2**31
        ids.append(lo + (state >> 7) % span)
    if step.token_pattern == "repeat":
        return [ids[i % len(ids)] for i in range(step.prompt_tokens)]
    return ids


def run_probe(
    base_url: str,
    model: str,
    spec: ProbeSpec,
    *,
    deadline: float,
    alive: Alive,
    progress: Progress,
) -> ProbeResult:
    """Run each step as one burst of concurrent completions, so the engine schedules them as one
    decode batch of ``concurrency`` requests at ``prompt_tokens`` context (§3.6)."""
    result = ProbeResult()
    total = sum(s.concurrency for s in spec.steps)
    done = 0
    for position, step in enumerate(spec.steps):
        if time.monotonic() >= deadline:
            result.timed_out = True
            break
        if not alive():
            result.engine_exited = True
            break
        result.steps.append(_run_step(base_url, model, spec, (position, step), deadline))
        done += step.concurrency
        progress(done, total)
    return result


def _run_step(
    base_url: str, model: str, spec: ProbeSpec, placed: tuple[int, ProbeStep], deadline: float
) -> StepResult:
    step = placed[1]
    timeout = max(0.1, min(spec.request_timeout_s, deadline - time.monotonic()))
    bodies = [_body(model, spec, placed, i) for i in range(step.concurrency)]
    began = time.time()
    failed = [e for e in send_burst(base_url, bodies, timeout) if e is not None]
    ok = len(bodies) - len(failed)
    return StepResult(step.name, len(bodies), ok, failed[:20], began, time.time())


def _body(model: str, spec: ProbeSpec, placed: tuple[int, ProbeStep], index: int) -> dict[str, Any]:
    position, step = placed
    return {
        "model": model,
        "prompt": prompt_ids(step, index, spec.token_id_min, spec.token_id_max, position),
        "max_tokens": step.max_tokens,
        "min_tokens": step.max_tokens,
        "temperature": 0.0,
        "ignore_eos": True,  # vLLM extension: keep every request decoding for max_tokens steps.
    }
