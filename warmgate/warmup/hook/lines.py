"""The compile hook's log lines: their one format, written by the engine hook, read by the runner.

The engine hook (``enginehook``, loaded into every vLLM process) writes one line per event on
the engine's stderr; the runner's log parser (and any other reader, e.g. a serving-side
watcher) turns them back into ``HookEvent`` with ``parse_hook_line``:

    warmgate-hook v1 loaded pid=1234 t=1724300000.1 gaudi=true
    warmgate-hook v1 attached pid=1234 t=1724300000.123 targets=["sample_tokens","warmup_model"]
    warmgate-hook v1 not-attached pid=1234 t=1724300000.124 target=step reason="... missing"
    warmgate-hook v1 warmup pid=1234 t=1724300100.5 count=250 drafter=25
    warmgate-hook v1 compile pid=1234 t=1724300200.25 where=drafter graph=["decode",16,1,48] count=1
    warmgate-hook v1 compile pid=1234 t=1724300200.26 where=step count=3 drafter=1
    warmgate-hook v1 ran pid=1234 t=1724300200.2 where=drafter graph=["decode",16,1,48] warmup=false

    warmgate-hook v1 drafter-warm pid=1234 t=1724300101.0 graph=["decode",16,1,48] ok=true s=0.4
        ran=[["decode",16,1,48],["decode",1,1,1]]
    warmgate-hook v1 drafter-warm pid=1234 t=1724300101.5 graph=["prompt",1,512,0] ok=false
        s=0.1 reason="..."
    warmgate-hook v1 drafter-warmup pid=1234 t=1724300102.0 state=done engine=gaudi planned=293
        warmed=292 failed=1 seconds=41.2
    warmgate-hook v1 burst pid=1234 t=1724300300.5 burst=3f9a0c1d2e4b n=3 arrived=3 held_s=0.212
        whole=true

(each of the last four on one line).

``burst`` is one burst of the runner's (probe or sweep) at vLLM's scheduler: how many of its
requests arrived and how long the burst gate held them (``hook/burst_gate.py``).
``drafter-warm`` is one shape of the direct drafter warmup (``hook/drafter_warm.py``, issue 33)
and ``drafter-warmup`` its closing line (``state``: done, off, unreadable, no-drafter).
``ran`` names a drafter graph the first time a process runs it (compiled then or before, e.g.
from the recipe cache), so the runner knows which planned graphs a sweep step drove even when
nothing compiled. Fields are ``key=value``; a value is a JSON string, list or number, or a bare
word. ``t`` is the wall clock of the engine's container (the runner's own), so the runner
places each compile in the sweep or the probe. Standard library only, and no warmgate import:
the hook imports this module inside the engine's process.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["HOOK_PREFIX", "HookEvent", "format_hook_line", "parse_hook_line"]

HOOK_PREFIX = "warmgate-hook v1"
KINDS = (
    "loaded",
    "attached",
    "not-attached",
    "warmup",
    "compile",
    "ran",
    "drafter-warm",
    "drafter-warmup",
    "burst",
)
# The prefix may follow another process's text on the same line (a vLLM process prefix, or a
# record that another write cut); everything after it belongs to the event.
_LINE = re.compile(
    r"warmgate-hook v1 (loaded|attached|not-attached|warmup|compile|ran|drafter-warmup"
    r"|drafter-warm|burst)((?: .*)?)$"
)
# A list may hold lists one level deep (``ran=[["decode",1,1,1]]``).
_FIELD = re.compile(r' (\w+)=("(?:[^"\\]|\\.)*"|\[(?:[^\[\]]|\[[^\[\]]*\])*\]|[^\s"\[]\S*)')
_BARE = re.compile(r"[A-Za-z_][\w.-]*")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


@dataclass(frozen=True)
class HookEvent:
    """One hook line: its kind, the engine process, its wall-clock time and the other fields."""

    kind: str
    pid: int
    t: float
    fields: dict[str, Any] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """Graph compilations the event counted (0 when it counts none)."""
        value = self.fields.get("count", 0)
        return value if isinstance(value, int) else 0

    @property
    def drafter(self) -> int:
        """Of ``count``, the compilations inside the drafter's forwards (step and warmup)."""
        value = self.fields.get("drafter", 0)
        return value if isinstance(value, int) else 0

    @property
    def where(self) -> str:
        """``drafter`` (one drafter forward) or ``step`` (one whole engine step)."""
        return str(self.fields.get("where", ""))

    @property
    def graph(self) -> tuple[Any, ...] | None:
        """The drafter forward's (phase, batch, query, blocks), as the target's _check_config."""
        value = self.fields.get("graph")
        return tuple(value) if isinstance(value, list) else None


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str) and _BARE.fullmatch(value):
        return value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=True)


def format_hook_line(kind: str, pid: int, t: float, **fields: Any) -> str:
    """One event as a line (with its newline), e.g. ``format_hook_line("compile", 7, 1.5,
    where="step", count=2, drafter=0)`` -> "warmgate-hook v1 compile pid=7 t=1.5 where=step ..."."""
    if kind not in KINDS:
        raise ValueError(f"unknown hook event {kind!r}")
    parts = [HOOK_PREFIX, kind, f"pid={int(pid)}", f"t={round(float(t), 3)!r}"]
    parts += [f"{key}={_value(value)}" for key, value in fields.items()]
    return " ".join(parts) + "\n"


def _decode(text: str) -> Any:
    if text[0] in '"[':
        return json.loads(text)
    if _NUMBER.fullmatch(text):
        return float(text) if any(c in text for c in ".eE") else int(text)
    return {"true": True, "false": False}.get(text, text)


def parse_hook_line(line: str) -> HookEvent | None:
    """The event of a line holding a hook line, or None (also for a garbled one)."""
    if HOOK_PREFIX not in line:
        return None
    m = _LINE.search(line.rstrip())
    if m is None:
        return None
    rest, fields, at = m.group(2), {}, 0
    for f in _FIELD.finditer(rest):
        if f.start() != at:
            return None  # text between fields: another write landed inside the line
        try:
            fields[f.group(1)] = _decode(f.group(2))
        except ValueError:
            return None
        at = f.end()
    if at != len(rest):
        return None
    pid, t = fields.pop("pid", None), fields.pop("t", None)
    if not isinstance(pid, int) or not isinstance(t, (int, float)):
        return None
    return HookEvent(m.group(1), pid, float(t), fields)
