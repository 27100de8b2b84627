"""The burst gate inside the engine: a burst's requests enter the scheduler together.

The probe and the drafter sweep send bursts (``runner/burst.py``) and rest on one assumption:
the scheduler sees a burst as one batch (the sweep's plan allows its requests to reach the
scheduler within ``arrival_steps`` = 2 engine steps). The runner only controls when requests
leave it; the engine's API server turns them into engine requests one by one, while EngineCore
already steps on the first ones. On a busy CPU that took 29 and 44 engine steps for a burst of
3 (docs/testing.md, "The sweep under the real scheduler"), and on Gaudi a burst of hundreds of
requests is the case the sweep's design names as most at risk.

So the runner names every request of a burst ``wgburst-<key>-<i>of<n>`` (its ``X-Request-Id``,
which vLLM keeps inside its own request id) and, with ``WARMGATE_BURST_GATE`` set to a number
of seconds, the hook wraps vLLM's ``Scheduler.schedule``: a request of a burst that has not
reached the scheduler whole stays out of the waiting queue for that step (taken out before,
put back in front after, in its order), until all ``n`` are waiting or the burst has waited
that many seconds; then the scheduler sees every request of it at once. Other requests are
never held. One line per burst says how it went:

    warmgate-hook v1 burst pid=1234 t=1724300300.5 burst=3f9a0c1d2e4b n=3 arrived=3 held_s=0.212
        whole=true

``whole=false``: the time ran out and the burst went in as it was (what happened without the
gate; on Gaudi the sweep's graph check still sends a step again whose graphs did not run).
Anything unexpected in the scheduler's queue (another vLLM) switches the gate off with a
``not-attached target=burst-gate`` line: the engine always runs. Standard library only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

# The environment variable that switches the gate on: the longest hold, in seconds.
BURST_GATE_ENV = "WARMGATE_BURST_GATE"
SCHEDULER_MODULE = "vllm.v1.core.sched.scheduler"
# How long a step that held a burst and scheduled nothing else sleeps, so EngineCore leaves the
# CPU to the API server that is still turning the burst's last requests into engine requests.
IDLE_S = 0.002
_ID = re.compile(r"wgburst-([0-9a-z]+)-(\d+)of(\d+)")

Emit = Callable[..., None]


def burst_request_id(key: str, index: int, n: int) -> str:
    """The id of request ``index`` of an ``n``-request burst (``key``: letters and digits)."""
    return f"wgburst-{key}-{index}of{n}"


def parse_burst_id(request_id: str) -> tuple[str, int] | None:
    """The burst key and size named in a (vLLM) request id, or None."""
    m = _ID.search(request_id)
    if m is None or int(m.group(3)) < 1:
        return None
    return m.group(1), int(m.group(3))


@dataclass
class _Burst:
    n: int
    first: float
    seen: set[str] = field(default_factory=set)


class BurstGate:
    """Which waiting requests to keep out of the next step (pure: the clock is given)."""

    def __init__(self, hold_s: float, emit: Emit, clock: Callable[[], float] = time.monotonic):
        self.hold_s, self.emit, self.clock = hold_s, emit, clock
        self.open: dict[str, _Burst] = {}
        self.released: set[str] = set()

    def held(self, request_ids: Iterable[str]) -> set[str]:
        """Of the waiting requests, those of a burst still arriving (and within its hold)."""
        now = self.clock()
        waiting: dict[str, list[str]] = {}
        for rid in request_ids:
            named = parse_burst_id(rid)
            if named is None or named[0] in self.released:
                continue
            key, n = named
            burst = self.open.setdefault(key, _Burst(n, now))
            burst.seen.add(rid)
            waiting.setdefault(key, []).append(rid)
        out: set[str] = set()
        for key, rids in waiting.items():
            burst = self.open[key]
            whole = len(burst.seen) >= burst.n
            if whole or now - burst.first >= self.hold_s:
                self._release(key, burst, now, whole)
            else:
                out.update(rids)
        return out

    def _release(self, key: str, burst: _Burst, now: float, whole: bool) -> None:
        del self.open[key]
        self.released.add(key)
        held = round(now - burst.first, 3)
        self.emit("burst", burst=key, n=burst.n, arrived=len(burst.seen), held_s=held, whole=whole)


def attach(module: ModuleType, hold_s: float, emit: Emit) -> None:
    """Wrap ``module.Scheduler.schedule`` (vLLM v1) with a ``BurstGate``."""
    cls = getattr(module, "Scheduler", None)
    original = getattr(cls, "schedule", None)
    if not isinstance(cls, type) or not callable(original):
        raise LookupError(f"{module.__name__}.Scheduler.schedule missing")
    gate = BurstGate(hold_s, emit)
    state = {"on": True}

    def take(queue: Any) -> list[Any]:
        if not state["on"]:
            return []
        try:
            waiting = list(queue)
            ids = gate.held(r.request_id for r in waiting)
            held = [r for r in waiting if r.request_id in ids]
            if held:
                queue.remove_requests(held)
            return held
        except Exception as exc:  # another vLLM's queue: the engine runs on, ungated
            state["on"] = False
            emit("not-attached", target="burst-gate", reason=f"{type(exc).__name__}: {exc}")
            return []

    def schedule(self: Any, *args: Any, **kwargs: Any) -> Any:
        held = take(self.waiting)
        try:
            out = original(self, *args, **kwargs)
        finally:
            for request in reversed(held):  # back in front, in their order
                self.waiting.prepend_request(request)
        if held and not getattr(out, "total_num_scheduled_tokens", 1):
            time.sleep(IDLE_S)
        return out

    schedule.__wrapped__ = original  # type: ignore[attr-defined]
    cls.schedule = schedule  # type: ignore[attr-defined]
    emit("attached", targets=["burst-gate"], hold_s=hold_s)
