"""The demo's words: whole sentences wrapped at word boundaries, what a user came for first.

Condition messages are printed whole (wrapped, never cut mid-word), one clause per line; a
one-line view shortens at a word boundary with an ellipsis. The summary of each example leads
with what was proved, what was warmed and verified (with the drafter sweep), then what serves.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Mapping
from typing import Any, Final

WIDTH: Final = 100
# The conditions of the summary, in the order a user reads them, with the word that leads.
SUMMARY: Final = (("proved", "CoverageProven"), ("warmed", "Warmed"), ("serving", "Ready"))
# The condition whose message says what a phase is doing.
EXPLAINS: Final = {
    "Planning": "BucketsPlanned",
    "Pending": "Warmed",
    "Warming": "Warmed",
    "Starting": "Ready",
    "Ready": "Ready",
    "Failed": "Stalled",
}
LEGEND: Final = (
    "Pending: the warmup Job waits for its Pod. Warming: the runner warms the plan in the "
    "engine. Starting: the warmup is verified and the serving Pods roll out. Ready: they passed "
    "the readiness gate the operator opens for a verified plan."
)


def wrap(text: str, first: str, indent: str | None = None, width: int = WIDTH) -> list[str]:
    """``first`` then ``text``, wrapped at word boundaries; later lines under ``indent``."""
    rest = indent if indent is not None else " " * len(first)
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=first,
        subsequent_indent=rest,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [first.rstrip()]


def shorten(text: str, width: int) -> str:
    """At most ``width`` characters, cut at a word boundary with ' ...' (never mid-word)."""
    # textwrap.shorten itself would cut a long word, or a name at its hyphens.
    wrapper = textwrap.TextWrapper(
        width=max(width, 12),
        max_lines=1,
        placeholder=" ...",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return wrapper.fill(" ".join(text.split()))


def conditions(status: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The status' conditions by type."""
    return {c["type"]: c for c in status.get("conditions") or []}


def clauses(message: str) -> list[str]:
    """The message's '; '-separated clauses, outside parentheses (a clause is one thought)."""
    parts, depth, start = [], 0, 0
    for m in re.finditer(r"[()]|; ", message):
        token = m.group()
        depth += {"(": 1, ")": -1}.get(token, 0)
        if token == "; " and depth == 0:
            parts.append(message[start : m.start()])
            start = m.end()
    return [p for p in (*parts, message[start:]) if p.strip()]


def condition_lines(c: Mapping[str, Any], first: str) -> list[str]:
    """'Warmed=True (WarmupSucceeded):' then each clause of its message, whole and wrapped."""
    lines = [f"{first}{c['type']}={c['status']} ({c['reason']})"]
    indent = " " * len(first)
    for clause in clauses(str(c.get("message") or "")):
        lines += wrap(clause, f"{indent}- ", f"{indent}  ")
    return lines


def phase_message(status: Mapping[str, Any]) -> str:
    """The message of the condition that says what the current phase is doing."""
    c = conditions(status).get(EXPLAINS.get(str(status.get("phase")), ""))
    return str(c.get("message") or "") if c else ""


def warmup_facts(status: Mapping[str, Any]) -> list[str]:
    """What status.warmup records of the verified run that the Warmed message does not say
    (the message of a served plan's record names only the Job): buckets, time, KV blocks,
    and the drafter sweep as the runner's compile hook saw it."""
    warmup, plan = status.get("warmup") or {}, status.get("plan") or {}
    said = str(conditions(status).get("Warmed", {}).get("message") or "")
    facts = []
    if warmup.get("warmedBuckets") is not None and warmup.get("durationSeconds") is not None:
        facts.append(f"{warmup['warmedBuckets']} buckets warmed in {warmup['durationSeconds']} s")
    if warmup.get("kvBlocks") is not None and "KV blocks" not in said:
        facts.append(f"KV blocks {warmup['kvBlocks']}")
    if warmup.get("drafterDriven") is not None and "drafter" not in said:
        verified = warmup.get("drafterVerified")
        checked = ""
        if verified is not None:
            checked = ", none in the probe after it" if verified else ", not verified"
        facts.append(
            f"drafter: {warmup['drafterDriven']} of {plan.get('drafterSwept', '?')} planned "
            f"graphs compiled in the sweep{checked}"
        )
    return facts


def example_summary(obj: Mapping[str, Any], seconds: float | None) -> list[str]:
    """An example's outcome: its phase and time, then proved, warmed, serving, each whole."""
    status = obj.get("status") or {}
    took = f" after {seconds:.0f} s" if seconds is not None else ""
    lines = [f"   {obj['metadata']['name']}: {status.get('phase', 'no status')}{took}"]
    by_type = conditions(status)
    for word, type_ in SUMMARY:
        if type_ in by_type:
            lines += condition_lines(by_type[type_], f"     {word + ':':9}")
        if type_ == "Warmed" and type_ in by_type and by_type[type_]["status"] == "True":
            for fact in warmup_facts(status):
                lines += wrap(fact, " " * 14 + "- ", " " * 16)
    return lines


def headline(phases: Mapping[str, str], seconds: float) -> list[str]:
    """The one sentence that says how the run went, before the details."""
    ready = sum(1 for p in phases.values() if p == "Ready")
    text = (
        f"{ready} of {len(phases)} examples Ready in {seconds:.0f} s. Each plan was proved "
        "before any warmup ran, warmed by a real Job, verified from the engine's own log, and "
        "only then served. The engine was a stand-in, a test double, not vLLM (below)."
    )
    return wrap(text, "== Result: ", "   ")


def paragraph(text: str, indent: str = "   ") -> list[str]:
    """A paragraph of whole sentences, wrapped."""
    return wrap(" ".join(text.split()), indent, indent)
