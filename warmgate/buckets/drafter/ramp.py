"""What one sweep step (n requests of P prompt tokens, max_tokens M) surely makes the drafter run.

Assumptions about the serving engine (vLLM V1 scheduler with vllm-gaudi's runner; docs/coverage.md,
"The sweep"), each one checked by the phase-2 runner through its compile counts:

1. The server is idle when a step starts; its n requests reach the scheduler within
   ``arrival_steps`` engine steps. Prompts are distinct (no prefix-cache hits), decoding is greedy
   with ignore_eos, so every request produces exactly M tokens and then stops.
2. The scheduler serves running requests first (1 + k tokens per decode: eagle-type drafters
   always propose k), then admits waiting ones first come first served, chunking prompts to the
   token budget (max_num_batched_tokens). Each prefill runs as its own batch of one.
3. Nothing is preempted: the KV cache holds n * ceil((P + M + k) / block) blocks (checked when
   num_gpu_blocks is known).

Then the step runs, after at most F = arrival_steps + ceil(n * P / (mbt - n * (1 + k))) engine
steps of prefill, a phase of decode steps in which all n requests decode with full drafts
(T = 1 + k). At its first step every request holds between P and P + (1 + k) * F tokens (S in
[``s_start``, ``s_first``]); at its last (when the first request completes) at least
P + ceil((M - 1) / (1 + k)) - 1 - F (S >= ``s_last``). In between S never decreases and grows by
at most ``stride`` = n * ceil((1 + k) / block) per step. So, whatever the drafts' acceptance, the
phase visits a window [u, v] of S when it starts inside it (u <= s_start, s_first <= v), or when
it starts below it, the window is at least ``stride`` wide and the phase gets past u
(s_first <= v, s_last >= u): a shape that holds on such a window is driven for sure. The
follow-up calls need more: X lies between S + n * floor((j - 1) / block) and
S + n * ceil((j + k - 1) / block) depending on acceptance, so their shape must hold on that whole
band for every S of the window.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from warmgate.buckets.drafter.walk import DrafterWalk, Key
from warmgate.buckets.engine.plan import BucketPlan
from warmgate.buckets.engine.steps import Bucket

__all__ = ["Ramp", "RampOracle"]

Window = tuple[int, int, Key]  # S low, S high (inclusive): the shape holds for every S between


@dataclass(frozen=True, slots=True)
class Ramp:
    """One sweep step and the bounds of its all-n decode phase."""

    concurrency: int
    prompt_tokens: int
    max_tokens: int
    s_start: int
    s_first: int
    s_last: int
    stride: int
    drift: int
    engine_steps: tuple[int, int]

    @property
    def decodes(self) -> bool:
        """Whether the step surely has an all-n decode phase (prompt-only steps do not)."""
        return self.s_last >= 0

    def visits(self, u: int, v: int) -> bool:
        """Whether its all-n decode phase surely has a step with S in [u, v]."""
        if not self.decodes or self.s_first > v:
            return False
        return self.s_start >= u or (v - u + 1 >= self.stride and self.s_last >= u)


class RampOracle:
    """Timeline bounds and guaranteed drafter shapes of sweep steps for one plan."""

    def __init__(self, plan: BucketPlan, walk: DrafterWalk, arrival_steps: int = 2) -> None:
        cfg = plan.config
        self.walk = walk
        self.k = cfg.num_speculative_tokens
        self.t = self.k + 1
        self.block = cfg.block_size
        self.mml = cfg.max_model_len
        self.mbt = cfg.max_num_batched_tokens
        self.mns = cfg.max_num_seqs
        self.kv = cfg.num_gpu_blocks
        self.arrival = arrival_steps

    # -- timeline --------------------------------------------------------------------------------

    def max_tokens_room(self, n: int, prompt: int) -> int:
        """The largest M clear of max_model_len's draft trimming that fits the KV cache."""
        room = self.mml - prompt - self.k - 2
        if self.kv is not None:
            room = min(room, self.kv // n * self.block - prompt - self.k)
        return room

    def prefill_steps(self, n: int, prompt: int) -> int | None:
        """F: engine steps until all n prompts are computed; None when decodes starve prefill."""
        room = self.mbt - n * self.t
        if room < 1 or n > self.mns:
            return None
        return self.arrival + -(-n * prompt // room)

    def ramp(self, n: int, prompt: int, max_tokens: int) -> Ramp | None:
        """The bounds of step (n, P, M), or None when an assumption cannot hold for it."""
        f = self.prefill_steps(n, prompt)
        if f is None or prompt < 1 or not 1 <= max_tokens <= self.max_tokens_room(n, prompt):
            return None
        block, t = self.block, self.t
        fastest = -(-(max_tokens - 1) // t)  # decode steps the fastest request needs
        s_start = n * -(-(prompt + 1) // block)
        s_first = n * -(-(prompt + t * f + 1) // block)
        s_last = self._s_last(n, prompt, f, max_tokens)
        steps = (-(-n * prompt // self.mbt) + fastest, f + max_tokens)
        stride = n * -(-t // block)
        return Ramp(n, prompt, max_tokens, s_start, s_first, s_last, stride, t * f, steps)

    def _s_last(self, n: int, prompt: int, f: int, max_tokens: int) -> int:
        """The ramp's ``s_last``: S at the all-n phase's last step, -1 when it has none.

        The only bound of a ramp that depends on M, and it never decreases as M grows.
        """
        grown = -(-(max_tokens - 1) // self.t) - 1 - f  # the fastest request's steps past F
        return n * -(-(prompt + grown + 1) // self.block) if grown > f else -1

    def prompt_for(self, n: int, s_first: int) -> int | None:
        """The largest P whose ramp starts at or below ``s_first`` (None if even P = 1 does not)."""
        lo, hi, best = 1, self.mml, None
        while lo <= hi:
            mid = (lo + hi) // 2
            f = self.prefill_steps(n, mid)
            if f is not None and n * -(-(mid + self.t * f + 1) // self.block) <= s_first:
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def cheapest(self, n: int, u: int, v: int) -> Ramp | None:
        """The step with the fewest engine steps whose decode phase surely visits [u, v]."""
        top = self.prompt_for(n, v)  # both candidates' largest prompt
        found = [r for r in (self._start_in(n, u, v, top), self._pass_through(n, u, v, top)) if r]
        return min(found, key=lambda r: r.engine_steps[1], default=None)

    def _start_in(self, n: int, u: int, v: int, top: int | None) -> Ramp | None:
        """Prompts sized so the phase starts inside [u, v]; M just long enough to have a phase.

        ``top`` is ``prompt_for(n, v)``.
        """
        prompt = max(1, (-(-u // n) - 1) * self.block)
        if top is None or prompt > top:
            return None
        return self._shortest(n, prompt, (u, v))

    def _pass_through(self, n: int, u: int, v: int, top: int | None) -> Ramp | None:
        """The longest prompt starting below [u, v] (``top``); M just long enough to pass it."""
        if v - u + 1 < n * -(-self.t // self.block):
            return None
        return None if top is None else self._shortest(n, top, (u, v))

    def _shortest(self, n: int, prompt: int, window: tuple[int, int] | None) -> Ramp | None:
        """The smallest M whose ramp decodes and, given a window [u, v], surely visits it.

        Monotone in M: a longer phase visits more. Only ``s_last`` depends on M, so the binary
        search tests ``Ramp.visits`` (or ``Ramp.decodes``) as a bound on it, ``s_last >= need``,
        read off the ramp with M = 1 for everything else, and builds a Ramp only for the answer:
        the same probes and answer as searching over ``ramp(...)``, without a Ramp per probe
        (the sweep's hottest loop).
        """
        f, base = self.prefill_steps(n, prompt), self.ramp(n, prompt, 1)
        if f is None or base is None:
            return None  # no M has a ramp
        need = 0  # decodes: s_last >= 0
        if window is not None:
            u, v = window
            if base.s_first > v:
                return None  # starts past the window whatever M
            if base.s_start < u:  # starts below it: it must be wide enough and the phase get to u
                if v - u + 1 < base.stride:
                    return None
                need = max(u, 0)
        lo, hi, best = 1, self.max_tokens_room(n, prompt), None
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._s_last(n, prompt, f, mid) >= need:
                best, hi = mid, mid - 1
            else:
                lo = mid + 1
        return None if best is None else self.ramp(n, prompt, best)

    def longest(self, r: Ramp) -> Ramp:
        """The same step with the largest M: a longer decode phase, more shapes for its time."""
        n, prompt = r.concurrency, r.prompt_tokens
        return self.ramp(n, prompt, self.max_tokens_room(n, prompt)) or r

    # -- guarantees ------------------------------------------------------------------------------

    def windows(self, n: int, lo: int, hi: int) -> Iterator[Window]:
        """Maximal windows of S in [lo, hi] on which a drafter shape is sure, for n requests.

        Call 1 runs the target's (B*T, 1, C): a window is a run of S with that shape. Calls
        j = 2..k run (B, 1, C'(X)): a window is a run of S with that B on which C' is one value
        over the whole acceptance band of X.
        """
        if lo > hi:
            return
        t, walk = self.t, self.walk
        pieces = list(walk.decode.pieces(n, t, lo, hi))
        for a, b, shape in _runs(pieces, t, by_batch=False):
            yield a, b, ("decode", shape)
        if self.k < 2:
            return
        for a, b, shape in _runs(pieces, t, by_batch=True):
            padded = shape[0] // t
            for j in range(2, self.k + 1):
                low, high = (j - 1) // self.block, -(-(j + self.k - 1) // self.block)
                for xa, xb, ctx in walk.decode.block_pieces(padded, 1, a + n * low, b + n * high):
                    u, v = max(a, xa - n * low), min(b, xb - n * high)
                    if u <= v:
                        yield u, v, ("decode", (padded, 1, ctx))

    def guaranteed(self, r: Ramp) -> set[Key]:
        """The drafter shapes step ``r`` surely runs (decode phase and its prompts' calls 2..k)."""
        out: set[Key] = set()
        if r.decodes:
            for u, v, key in self.windows(r.concurrency, r.s_start, max(r.s_first, r.s_last)):
                if r.visits(u, v):
                    out.add(key)
            out |= self._first_step_next(r)
        for j in range(2, self.k + 1):  # every prompt completes with L = P tokens
            x = -(-(r.prompt_tokens + j - 1) // self.block)
            out.add(("decode", (1, 1, self.walk.next_ctx(1, x))))
        return out

    def _first_step_next(self, r: Ramp) -> set[Key]:
        """Calls 2..k of the phase's first step: every request holds P..P + drift tokens.

        X_j then lies in [n * ceil((P + j) / block), n * ceil((P + drift + k + j) / block)]:
        one shape when the prompts end early enough in their last block (X_j = S).
        """
        n, t, walk = r.concurrency, self.t, self.walk
        batches = {shape[0] // t for _, _, shape in walk.decode.pieces(n, t, r.s_start, r.s_first)}
        if len(batches) != 1:
            return set()
        padded = batches.pop()
        out: set[Key] = set()
        for j in range(2, self.k + 1):
            xs = n * -(-(r.prompt_tokens + j) // self.block)
            xf = n * -(-(r.prompt_tokens + r.drift + self.k + j) // self.block)
            ctxs = {ctx for _, _, ctx in walk.decode.block_pieces(padded, 1, xs, xf)}
            if len(ctxs) == 1:
                out.add(("decode", (padded, 1, ctxs.pop())))
        return out

    def starts(self, n: int, hi: int) -> set[int]:
        """Blocks per request b where some shape of n requests starts (S = n * b first fits)."""
        t, walk = self.t, self.walk
        pieces = list(walk.decode.pieces(n, t, n, hi))
        spans = [(a, b) for a, b, _ in pieces]
        for a, b, shape in _runs(pieces, t, by_batch=True):
            runs = walk.decode.block_pieces(shape[0] // t, 1, a, b)
            spans += [(max(a, xa), min(b, xb)) for xa, xb, _ in runs]
        return {-(-a // n) for a, b in spans if -(-a // n) * n <= b}

    def opening(self, n: int, blocks: int) -> Ramp | None:
        """A step whose requests start with exactly ``blocks`` blocks each, M just long enough."""
        prompt = max(1, (blocks - 1) * self.block)
        return self._shortest(n, prompt, None)


def _runs(
    pieces: list[tuple[int, int, Bucket]], t: int, by_batch: bool
) -> Iterator[tuple[int, int, Bucket]]:
    """Join adjacent pieces with one shape (or, ``by_batch``, one padded batch B = shape / T)."""
    current: list[int] | None = None
    shape0: Bucket = (0, 0, 0)
    for a, b, shape in pieces:
        same = shape[0] // t == shape0[0] // t if by_batch else shape == shape0
        if current is not None and same and current[1] == a - 1:
            current[1] = b
            continue
        if current is not None:
            yield current[0], current[1], shape0
        current, shape0 = [a, b], shape
    if current is not None:
        yield current[0], current[1], shape0
