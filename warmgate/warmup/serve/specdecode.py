"""Serve mode's reader of the engine's own spec-decode counters: does k pay off?

vLLM counts every draft on its Prometheus endpoint (vllm/v1/spec_decode/metrics.py):
``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
``..._num_accepted_tokens_total`` and ``..._num_accepted_tokens_per_pos_total{position="i"}``,
one series per engine and model. The observer reads the engine's ``/metrics`` on loopback at the
engine's own port, sums each counter over its series, and keeps the totals of the Pod's earlier
engine starts (the counters restart at 0 with the engine), so the figures cover the Pod's life:

    acceptance_rate        = accepted_tokens / draft_tokens        (0 .. 1)
    mean_acceptance_length = 1 + accepted_tokens / drafts          (1 .. 1 + k)

e.g. k = 3, 10 drafts, 30 draft tokens, 24 accepted: rate 0.8, mean length 3.4 (docs/runner.md,
"Spec-decode acceptance"). Standard library only.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any

from warmgate.warmup.serve.tally import ServeTally

COUNTERS = {
    "drafts": "vllm:spec_decode_num_drafts_total",
    "draft_tokens": "vllm:spec_decode_num_draft_tokens_total",
    "accepted_tokens": "vllm:spec_decode_num_accepted_tokens_total",
}
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
DEFAULT_INTERVAL_S = 10.0  # vLLM logs its own spec-decode line every 10 s too
# name{labels} value: the text exposition format's sample line (no timestamp from vLLM)
_SAMPLE = re.compile(r"^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)")
_POSITION = re.compile(r'position="(\d+)"')
# The engine is in this Pod: never route through an HTTP(S)_PROXY from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
Totals = dict[str, Any]


def parse(text: str) -> Totals | None:
    """The counters summed over their series, per position for the accepted tokens; None when
    the engine exports none of them (no speculative decoding)."""
    totals: Totals = {}
    positions: dict[int, float] = {}
    names = {v: k for k, v in COUNTERS.items()}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m is None or line.startswith("#"):
            continue
        name, labels, value = m.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        if name in names:
            totals[names[name]] = totals.get(names[name], 0.0) + number
        elif name == PER_POSITION and (p := _POSITION.search(labels or "")):
            positions[int(p.group(1))] = positions.get(int(p.group(1)), 0.0) + number
    if not totals:
        return None
    out: Totals = {k: int(totals.get(k, 0.0)) for k in COUNTERS}
    width = max(positions, default=-1) + 1
    out["per_position"] = [int(positions.get(i, 0.0)) for i in range(width)]
    return out


def add(a: Totals, b: Totals) -> Totals:
    """Two engine starts' totals together (per position element by element)."""
    out: Totals = {k: int(a.get(k, 0)) + int(b.get(k, 0)) for k in COUNTERS}
    pa, pb = list(a.get("per_position") or []), list(b.get("per_position") or [])
    width = max(len(pa), len(pb))
    out["per_position"] = [
        (pa[i] if i < len(pa) else 0) + (pb[i] if i < len(pb) else 0) for i in range(width)
    ]
    return out


def figures(totals: Totals) -> dict[str, Any]:
    """The status board's ``spec_decode`` figures from the totals (rates null before a draft)."""
    drafts, tokens = int(totals["drafts"]), int(totals["draft_tokens"])
    accepted = int(totals["accepted_tokens"])
    per_position = (totals.get("per_position") or []) if drafts else []
    return {
        "drafts": drafts,
        "draft_tokens": tokens,
        "accepted_tokens": accepted,
        "acceptance_rate": round(accepted / tokens, 4) if tokens else None,
        "mean_acceptance_length": round(1 + accepted / drafts, 4) if drafts else None,
        "per_position_acceptance_rate": [round(a / drafts, 4) for a in per_position],
    }


def metrics_url(engine: Sequence[str]) -> str:
    """The engine's /metrics on loopback, from its own ``--port`` (vLLM's default 8000)."""
    port = "8000"
    for i, arg in enumerate(engine):
        if arg == "--port" and i + 1 < len(engine):
            port = engine[i + 1]
        elif arg.startswith("--port="):
            port = arg.split("=", 1)[1]
    return f"http://127.0.0.1:{port}/metrics"


def read(url: str, timeout_s: float = 5.0) -> str:
    """GET the engine's metrics text."""
    try:
        with _OPENER.open(url, timeout=timeout_s) as response:
            return str(response.read().decode("utf-8", "replace"))
    except urllib.error.HTTPError as exc:
        exc.close()  # it holds the response open
        raise


class Reader:
    """Reads the engine's counters into ``state`` (the observer's, saved across engine starts)
    whenever ``tick`` finds ``interval_s`` gone by. It runs in the observer's own loop, between
    reads of the log copies: one thread, so ``state`` is never changed while it is saved."""

    def __init__(self, url: str, state: ServeTally, interval_s: float) -> None:
        self.url, self.state, self.interval_s = url, state, interval_s
        totals = state.spec_decode_totals
        # a new engine start: what the last one counted becomes "earlier"
        totals["earlier"] = add(totals.get("earlier") or {}, totals.get("current") or {})
        totals["current"] = {}
        self.next_at = time.monotonic() + interval_s

    def timeout(self) -> float | None:
        """Seconds until the next read (None: never)."""
        if self.interval_s <= 0:
            return None
        return max(0.0, self.next_at - time.monotonic())

    def tick(self) -> bool:
        """Read when due; True when the state changed."""
        if self.interval_s <= 0 or time.monotonic() < self.next_at:
            return False
        self.next_at = time.monotonic() + self.interval_s
        return self.once()

    def once(self) -> bool:
        """One read; an error is kept once figures exist (before, the engine is starting)."""
        try:
            current, error = parse(read(self.url, timeout_s=2.0)), None
        except (OSError, ValueError) as exc:
            current, error = None, f"{type(exc).__name__}: {exc}"[:300]
        totals = self.state.spec_decode_totals
        if current is not None:
            totals["current"] = current
        shown = self.state.spec_decode
        if current is None:
            if shown is None:
                return False  # nothing measured yet (engine starting, or no speculative decoding)
            self.state.spec_decode = {**shown, "error": error}
            return True
        found = figures(add(totals["earlier"], totals["current"]))
        self.state.spec_decode = {**found, "scraped_unix": int(time.time()), "error": None}
        return True


def samples(shown: dict[str, Any] | None) -> list[tuple[str, str, float]]:
    """The serving Pod's spec-decode gauges from the tally's ``spec_decode``, once the engine
    has drafted."""
    if shown is None:
        return []
    gauges = [
        ("acceptance_rate", "Accepted draft tokens / draft tokens (engine counters)."),
        ("mean_acceptance_length", "1 + accepted draft tokens / drafts: tokens per step."),
        ("drafts", "Drafts the engine made (this Pod)."),
        ("draft_tokens", "Draft tokens the engine proposed (this Pod)."),
        ("accepted_tokens", "Draft tokens the engine accepted (this Pod)."),
    ]
    return [
        (f"warmgate_runner_spec_decode_{key}", text, float(shown[key]))
        for key, text in gauges
        if shown.get(key) is not None
    ]
