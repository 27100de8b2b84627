"""The runner's probe workload, designed from the plan: decode batches and contexts that matter."""

from __future__ import annotations

from typing import Final

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import BucketPlan
from warmgate.buckets.engine.methods import METHODS
from warmgate.contract.order import ProbeSpec, ProbeStep
from warmgate.contract.sweepplan import SweepSpec

# Decode steps per request: enough for several spec-decode steps at every batch size, short
# enough that the probe costs seconds, not minutes (docs/runner.md, "Probe").
MAX_TOKENS: Final = 16
# A near-limit request stops k slots short of max_model_len at some step, so the scheduler
# runs partial drafts (bucketing reference §5.3): two of them keep the batch small.
NEAR_LIMIT_CONCURRENCY: Final = 2
SHORT_PROMPT: Final = 64
# Prompt tokens of one long-context burst: at 2048-8192 batched tokens a step, tens of prefill
# steps, so the probe stays bounded even at max_num_seqs 2048 (hypothetical costs, not measured).
TOKEN_BUDGET: Final = 262144


# Prompt token ids (runner plan `probe.token_id_min/max`): common to every real vocabulary.
TOKEN_ID_MIN: Final = 100
TOKEN_ID_MAX: Final = 20000


def _batch_sizes(plan: BucketPlan) -> list[int]:
    """Smallest, middle and largest seed decode batch size within max_num_seqs.

    e.g. seeds with bs 1, 2, 4, ..., 128 and max_num_seqs 128 -> [1, 16, 128]: the ends are
    where padding and the 1+k expansion differ most, the middle is the common case.
    """
    max_seqs = plan.config.max_num_seqs
    sizes = sorted({b for b, _, _ in plan.seed_decode_buckets if b <= max_seqs}) or [1]
    return sorted({sizes[0], sizes[len(sizes) // 2], sizes[-1]})


def _long_prompt(plan: BucketPlan, batch: int) -> int:
    """The longest prompt for `batch` sequences within the seed bucket of that bs, the KV
    cache (when pinned) and a prefill budget of TOKEN_BUDGET tokens per step.

    e.g. seed (8, 1, 256), block 128: 256 // 8 = 32 blocks a sequence -> 4096 - 16 decode
    tokens - 128 (one block of slack) = 3952 tokens, within max_model_len - MAX_TOKENS.
    """
    cfg = plan.config
    row = min((b for b, _, _ in plan.seed_decode_buckets if b >= batch), default=batch)
    blocks = max((c for b, _, c in plan.seed_decode_buckets if b == row), default=0)
    if cfg.num_gpu_blocks is not None:
        blocks = min(blocks, cfg.num_gpu_blocks)
    per_seq = blocks // batch * cfg.block_size - MAX_TOKENS - cfg.block_size
    return max(1, min(per_seq, cfg.max_model_len - MAX_TOKENS, TOKEN_BUDGET // batch))


def _step(name: str, concurrency: int, prompt: int, pattern: str = "varied") -> ProbeStep:
    return ProbeStep(name, concurrency, prompt, MAX_TOKENS, pattern)


def probe_steps(sdd: SpecDecodeDeployment, plan: BucketPlan) -> list[ProbeStep]:
    """Bursts over the decode batch sizes at short and long context, plus partial drafts.

    Every method gets a near-limit step (drafts capped by max_model_len, §5.3); ngram also gets
    a `repeat` burst, whose 8-id cycle makes the drafter find full matches while the `varied`
    bursts leave it few (so accepted lengths, and T, vary).
    """
    steps: list[ProbeStep] = []
    sizes = _batch_sizes(plan)
    near = plan.config.max_model_len - MAX_TOKENS
    for batch in sizes:
        steps.append(_step(f"decode-bs{batch}-short", batch, SHORT_PROMPT))
        long = _long_prompt(plan, batch)
        if long > SHORT_PROMPT:
            steps.append(_step(f"decode-bs{batch}-ctx{long}", batch, long))
    if METHODS[sdd.spec.speculative.method].prompt_lookup:
        middle = sizes[len(sizes) // 2]
        repeat = min(SHORT_PROMPT * 4, near)  # e.g. max_model_len 128: 112, not 256
        steps.append(_step(f"ngram-matches-bs{middle}", middle, repeat, "repeat"))
    steps.append(_step("partial-drafts-near-limit", NEAR_LIMIT_CONCURRENCY, near))
    return steps


def sweep_replay_steps(sweep: SweepSpec | None) -> list[ProbeStep]:
    """The drafter sweep's steps again, as probe steps: after the sweep they must compile
    nothing, so a graph the sweep missed shows up named in the verdict (docs/runner.md)."""
    steps = sweep.steps if sweep is not None else ()
    return [
        ProbeStep(f"replay-{s.name}", s.concurrency, s.prompt_tokens, s.max_tokens, "varied")
        for s in steps
    ]


def probe_section(
    sdd: SpecDecodeDeployment, plan: BucketPlan, sweep: SweepSpec | None = None
) -> ProbeSpec:
    """The runner plan's `probe`; no steps when spec.warmup.probeWorkload is false.
    With a drafter sweep the probe replays its steps after the planned ones."""
    probe = sdd.spec.warmup.probe_workload
    steps = [*probe_steps(sdd, plan), *sweep_replay_steps(sweep)] if probe else []
    low, high = token_ids(sdd.spec.model.vocab_size)
    return ProbeSpec(
        steps=tuple(steps),
        # The runner refuses a plan whose steps exceed max_requests; the default is 512.
        max_requests=max(512, sum(s.concurrency for s in steps)),
        request_timeout_s=300,
        token_id_min=low,
        token_id_max=high,
    )


def token_ids(vocab_size: int | None) -> tuple[int, int]:
    """The prompt token ids the probe and the sweep may use: 100..20000, kept inside a smaller
    vocabulary (vLLM refuses an id the model does not have), e.g. 512 entries -> (100, 511)."""
    top = TOKEN_ID_MAX if vocab_size is None else min(TOKEN_ID_MAX, vocab_size - 1)
    return min(TOKEN_ID_MIN, top // 4), top
