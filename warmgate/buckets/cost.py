"""Warmup time estimate from a bucket list: a low-high range per graph, summed, with its sources.

Every parameter is a (low, high) pair drawn from the public figures in the reference doc,
section 4.5 (none measured by warmgate on hardware):

- ``base_s`` 0.4-1.0 s per graph for an 8B model in BF16 at a small shape: the fork's log
  "Warmup finished in 49 secs" for 24 prompt + 48 decode buckets is 0.68 s per graph; the docs'
  Llama-3.1-8B BF16 warmup of 66 s without recipe cache over a default bucket set (roughly
  100-150 buckets) is 0.45-0.65 s.
- ``fp8`` 5-8x: the same docs give 504 s for FP8 against 66 s for BF16 (7.6x).
- ``model_exp`` 0.4-0.7: compile time grows sublinearly with parameters (graph size follows
  layers, not width). Llama-4-Maverick (about 400B) at 131k context compiled about 14 s per
  decode bucket (PR #1160): 0.68 s * (400/8)^0.7 = 10.5 s before shape growth.
- ``token_exp`` 0.15-0.3 on tokens per graph (bs*query) above 128: the fork's bs-64 prompt
  buckets took 15-40 s each (vllm-fork issue #201).
- ``block_exp`` 0.1-0.25 on KV blocks above 1024 (Maverick's decode buckets reach ~21k blocks).
- ``overhead_s`` 1-3 s for the sampler and defragmenter warmups (PR #129).
- ``cache_ratio`` 0.3-0.4 with a warm recipe cache (66 s -> 23 s BF16); FP8 with cache costs
  1.5x BF16 (34 s against 23 s).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from warmgate.buckets.engine.generate import Bucket
from warmgate.buckets.engine.plan import BucketPlan

__all__ = [
    "CostEstimate",
    "CostParams",
    "ModelProfile",
    "SweepCostParams",
    "SweepStepCost",
    "estimate_buckets",
    "estimate_direct_warmup",
    "estimate_plan",
    "estimate_sweep_step",
    "format_seconds",
    "format_span",
    "phase_seconds",
]

Dtype = Literal["bf16", "fp8"]
Span = tuple[float, float]


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """What the per-graph cost depends on besides the shape: size in billions and dtype."""

    params_b: float = 8.0
    dtype: Dtype = "bf16"


@dataclass(frozen=True, slots=True)
class CostParams:
    """(low, high) parameters of the per-graph model; see the module docstring for sources."""

    base_s: Span = (0.4, 1.0)
    fp8: Span = (5.0, 8.0)
    fp8_cached: Span = (1.5, 1.5)
    model_exp: Span = (0.4, 0.7)
    token_exp: Span = (0.15, 0.3)
    block_exp: Span = (0.1, 0.25)
    overhead_s: Span = (1.0, 3.0)
    cache_ratio: Span = (0.3, 0.4)
    ref_params_b: float = 8.0
    ref_tokens: int = 128
    ref_blocks: int = 1024


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """Estimated warmup seconds as a range, and how many graphs it covers."""

    low_s: float
    high_s: float
    prompt_graphs: int
    decode_graphs: int

    @property
    def graphs(self) -> int:
        """Graphs compiled (prompt plus decode buckets)."""
        return self.prompt_graphs + self.decode_graphs

    def __str__(self) -> str:
        return f"{_human(self.low_s)}-{_human(self.high_s)} for {self.graphs} graphs"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (seconds rounded to whole seconds: the range is the message)."""
        return {
            "low_s": round(self.low_s),
            "high_s": round(self.high_s),
            "graphs": self.graphs,
            "prompt_graphs": self.prompt_graphs,
            "decode_graphs": self.decode_graphs,
            "text": str(self),
        }


def graph_seconds(
    bucket: Bucket, prompt: bool, model: ModelProfile, params: CostParams, bound: int
) -> float:
    """One graph's compile seconds with the low (bound 0) or high (bound 1) parameters.

    e.g. 8B BF16 decode (64, 1, 2048): low 0.4 * 2^0.1 = 0.43 s, high 1.0 * 2^0.25 = 1.19 s.
    """
    bs, query, blocks = bucket
    tokens = bs * query if prompt else bs
    ctx_blocks = bs * blocks if prompt else blocks  # a prompt's block list holds bs * ctx
    size = (max(model.params_b, 0.1) / params.ref_params_b) ** params.model_exp[bound]
    work = max(1.0, tokens / params.ref_tokens) ** params.token_exp[bound]
    kv = max(1.0, ctx_blocks / params.ref_blocks) ** params.block_exp[bound]
    return float(params.base_s[bound] * size * work * kv)


def estimate_buckets(
    prompt: Iterable[Bucket],
    decode: Iterable[Bucket],
    model: ModelProfile | None = None,
    params: CostParams | None = None,
    *,
    recipe_cache: bool = False,
    overhead: bool = True,
) -> CostEstimate:
    """Warmup seconds for compiling these buckets; ``overhead`` adds the sampler warmup."""
    model = model or ModelProfile()
    params = params or CostParams()
    prompt, decode = list(prompt), list(decode)
    spans = [
        _total(prompt, decode, model, params, bound=bound, cached=recipe_cache)
        + (params.overhead_s[bound] if overhead else 0.0)
        for bound in (0, 1)
    ]
    return CostEstimate(spans[0], spans[1], len(prompt), len(decode))


def estimate_plan(
    plan: BucketPlan,
    model: ModelProfile | None = None,
    params: CostParams | None = None,
    *,
    recipe_cache: bool = False,
) -> CostEstimate:
    """Warmup seconds for a whole plan (prompt and decode lists, spec rows included)."""
    return estimate_buckets(
        plan.prompt_buckets, plan.decode_buckets, model, params, recipe_cache=recipe_cache
    )


def phase_seconds(plan: BucketPlan, params: CostParams | None = None) -> tuple[float, float]:
    """Estimated compile seconds of the plan's prompt and of its decode buckets (the upper
    bound, without the sampler's overhead), for the model of reference.

    Only their ratio is used (the warmup's cost-weighted progress): model size and dtype scale
    every graph alike, so it holds for any model. e.g. the eagle3 example: 35 prompt buckets of
    72 s in all (2.1 s each) and 334 decode buckets of 501 s (1.5 s each).
    """
    params = params or CostParams()
    model = ModelProfile()
    prompt = sum(graph_seconds(b, True, model, params, 1) for b in plan.prompt_buckets)
    decode = sum(graph_seconds(b, False, model, params, 1) for b in plan.decode_buckets)
    return float(prompt), float(decode)


def _total(
    prompt: list[Bucket],
    decode: list[Bucket],
    model: ModelProfile,
    params: CostParams,
    *,
    bound: int,
    cached: bool,
) -> float:
    seconds = sum(graph_seconds(b, True, model, params, bound) for b in prompt)
    seconds += sum(graph_seconds(b, False, model, params, bound) for b in decode)
    if model.dtype == "fp8":
        seconds *= (params.fp8_cached if cached else params.fp8)[bound]
    if cached:
        seconds *= params.cache_ratio[bound]
    return seconds


@dataclass(frozen=True, slots=True)
class SweepCostParams:
    """(low, high) figures for the drafter sweep's requests (docs/coverage.md, "Drafter graphs").

    None is measured: the reference doc has no decode-step or prefill timings, so these are
    assumptions for an 8B model in BF16 on one Gaudi2, to be replaced by the first Gaudi run:

    - ``decode_step_s`` 0.02-0.08 s per engine step (a target forward of up to 256 tokens plus
      k drafter calls), times ``(tokens / 256) ** 0.5`` above 256 tokens per step;
    - ``prefill_tokens_s`` 4000-16000 prompt tokens per second;
    - ``drafter_graph_s`` 0.2-0.4 s per drafter graph compiled in the sweep: the runtime cost of an
      unseen shape quoted in vllm-gaudi PR #1160 (reference doc section 3.4), a target graph's;
      a drafter graph (one decoder layer) should cost less.
    Model size scales step and prefill time like compile time (``CostParams.model_exp``); FP8 is
    taken as fast as BF16 here.
    """

    decode_step_s: Span = (0.02, 0.08)
    prefill_tokens_s: Span = (16000.0, 4000.0)  # (low-time, high-time) bound: fast, then slow
    drafter_graph_s: Span = (0.2, 0.4)
    ref_step_tokens: int = 256


def estimate_sweep_step(
    step_tokens: int,
    prompt_tokens: int,
    engine_steps: tuple[int, int],
    new_graphs: int,
    *,
    model: ModelProfile | None = None,
    params: SweepCostParams | None = None,
) -> tuple[float, float]:
    """Seconds (low, high) of one sweep step: its engine steps, its prefill, its new graphs.

    ``step_tokens`` is the decode step's token count n * (1 + k); ``prompt_tokens`` all prompts'
    tokens; ``engine_steps`` the (fewest, most) engine steps the step can take. e.g. 8B BF16, 8
    requests of k=3 (32 tokens a step), 8 x 1000 prompt tokens, 300-700 engine steps, 10 new
    graphs: low 300 * 0.02 + 8000 / 16000 + 10 * 0.2 = 8.5 s, high 700 * 0.08 + 2 + 4 = 62 s.
    """
    params = params or SweepCostParams()
    return SweepStepCost.of(step_tokens, prompt_tokens, engine_steps, model, params).seconds(
        new_graphs
    )


@dataclass(frozen=True, slots=True)
class SweepStepCost:
    """A sweep step's seconds as (low, high) ``fixed + graphs * per_graph``: the engine steps
    and prefill do not depend on how many of its graphs are new, so a greedy choice that
    re-prices a step as other steps cover its shapes only multiplies (`estimate_sweep_step`)."""

    fixed: Span
    per_graph: Span

    @classmethod
    def of(
        cls,
        step_tokens: int,
        prompt_tokens: int,
        engine_steps: tuple[int, int],
        model: ModelProfile | None,
        params: SweepCostParams,
    ) -> SweepStepCost:
        model = model or ModelProfile()
        graph = CostParams()
        width = max(1.0, step_tokens / params.ref_step_tokens) ** 0.5
        fixed = []
        for bound in (0, 1):
            size = (max(model.params_b, 0.1) / graph.ref_params_b) ** graph.model_exp[bound]
            decode = engine_steps[bound] * params.decode_step_s[bound] * width
            prefill = prompt_tokens / params.prefill_tokens_s[bound]
            fixed.append(size * (decode + prefill))
        return cls((fixed[0], fixed[1]), params.drafter_graph_s)

    def seconds(self, new_graphs: int) -> tuple[float, float]:
        """(low, high) seconds when ``new_graphs`` of the step's graphs are compiled by it."""
        low = self.fixed[0] + new_graphs * self.per_graph[0]
        return low, self.fixed[1] + new_graphs * self.per_graph[1]


def estimate_direct_warmup(
    shapes: Iterable[tuple[str, int, int, int]],
    warmed: Iterable[tuple[str, int, int, int]],
    model: ModelProfile | None = None,
    params: SweepCostParams | None = None,
) -> tuple[float, float]:
    """Seconds (low, high) of the engine plugin's direct drafter warmup (issue 33): per shape one
    ``propose`` (k drafter forwards, priced as one engine step of ``decode_step_s``) plus, for
    a prompt shape, the engine's dummy prefill of its tokens; a shape the engine's own warmup
    did not build (not in ``warmed``) also compiles, at the sweep's ``drafter_graph_s``. The
    same parameters as the sweep's estimate, so the two compare: what the sweep pays for
    traffic (engine steps of whole requests) the direct warmup does not.

    e.g. 8B BF16, 300 decode shapes of which 270 new: low 300 * 0.02 + 270 * 0.2 = 60 s,
    high 300 * 0.08 + 270 * 0.4 = 132 s.
    """
    params = params or SweepCostParams()
    model = model or ModelProfile()
    graph = CostParams()
    known = set(warmed)
    low = high = 0.0
    for shape in shapes:
        phase, bs, query, _ = shape
        spans = []
        for bound in (0, 1):
            size = (max(model.params_b, 0.1) / graph.ref_params_b) ** graph.model_exp[bound]
            run = params.decode_step_s[bound]
            if phase == "prompt":
                run += bs * query / params.prefill_tokens_s[bound]
            compile_s = 0.0 if shape in known else params.drafter_graph_s[bound]
            spans.append(size * run + compile_s)
        low, high = low + spans[0], high + spans[1]
    return low, high


def format_span(low_s: float, high_s: float) -> str:
    """A (low, high) seconds range as text: '45 s-12 min'."""
    return f"{_human(low_s)}-{_human(high_s)}"


def format_seconds(seconds: float) -> str:
    """Seconds as text: '45 s', '12 min', '2.5 h'."""
    return _human(seconds)


def _human(seconds: float) -> str:
    """Seconds under two minutes, else minutes, else hours: '45 s', '12 min', '2.5 h'."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
