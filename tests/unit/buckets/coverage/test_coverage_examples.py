"""The coverage prover on the reference doc's configs: the section 5.3 / 6 gaps and the counts."""

from __future__ import annotations

import math

import pytest

from warmgate.buckets import (
    EngineShapeConfig,
    UncoveredShape,
    brute_force_coverage,
    plan_buckets,
    prove_coverage,
)
from warmgate.buckets.coverage.states import StateSpace

CONFIG_A = {
    "max_num_seqs": 64,
    "max_model_len": 4096,
    "max_num_batched_tokens": 2048,
    "num_gpu_blocks": 8192,
}


def _config_a(k: int) -> EngineShapeConfig:
    return EngineShapeConfig(**CONFIG_A, num_speculative_tokens=k)


def _gaps(k: int, partial: bool = True) -> dict[tuple[int, int, int], UncoveredShape]:
    report = prove_coverage(plan_buckets(_config_a(k)), partial_drafts=partial)
    return {u.shape: u for u in report.uncovered if u.phase == "decode"}


@pytest.mark.parametrize(
    ("n", "tokens", "t", "shape", "warmed"),
    [
        (8, 3000, 3, (24, 1, 768), False),  # doc 5.3: 8 x 3000 tokens, partial T=3
        (30, 500, 2, (72, 1, 256), False),  # doc 5.3: 30 x 500 tokens, partial T=2
        (5, 1000, 2, (16, 1, 128), True),  # doc 5.3: warmed by coincidence
        (64, 4000, 4, (256, 1, 8192), True),  # doc 6: full drafts
    ],
)
def test_doc_partial_draft_examples_k3(
    n: int, tokens: int, t: int, shape: tuple[int, int, int], warmed: bool
) -> None:
    """Section 5.3 and the section 6 lookup table, config A with k=3."""
    plan = plan_buckets(_config_a(3))
    blocks = n * math.ceil((tokens + 1) / 128)
    assert plan.decode_shape(n, blocks, t) == shape
    gaps = _gaps(3)
    assert (shape in gaps) is not warmed
    if not warmed:
        gap = gaps[shape]
        assert gap.engine_config == ("decode", *shape)
        assert plan.decode_shape(*gap.example) == shape
        assert gap.requested[2] >= t * blocks


@pytest.mark.parametrize("k", [1, 2, 3])
def test_full_drafts_and_no_drafts_are_always_warmed(k: int) -> None:
    """Doc section 3.6: with T = 1+k (and with T = 1) every decode step runs a planned bucket."""
    plan = plan_buckets(_config_a(k))
    assert not _gaps(k, partial=False)
    report = prove_coverage(plan, partial_drafts=True)
    assert all(u.example[2] not in (1, k + 1) for u in report.uncovered if u.phase == "decode")


def test_k1_has_no_partial_draft_gap() -> None:
    """With k=1 the only T values are 1 and 2, both covered."""
    assert not _gaps(1)


def test_partial_drafts_leave_gaps_for_k2_and_k3() -> None:
    gaps2, gaps3 = _gaps(2), _gaps(3)
    assert gaps2
    assert len(gaps3) > len(gaps2)
    assert all(u.example[2] == 2 for u in gaps2.values())


def test_long_prompt_context_falls_back() -> None:
    """A prompt of q < 128 tokens after 3969+ cached tokens needs ctx 32 > the largest bucket 31."""
    report = prove_coverage(plan_buckets(_config_a(0)))
    prompt = [u for u in report.uncovered if u.phase == "prompt"]
    fallbacks = [u for u in prompt if u.shape[2] == 32]
    assert {u.shape for u in fallbacks} >= {(1, 128, 32), (1, 160, 32)}
    assert all(u.example[2] == 32 for u in fallbacks)
    # The one other prompt gap is planned but never compiled (next test).
    assert {u.shape for u in prompt} - {u.shape for u in fallbacks} == {(1, 2048, 31)}
    assert prompt[0].engine_config[0] == "prompt"


def test_report_counts_and_order() -> None:
    report = prove_coverage(plan_buckets(_config_a(3)))
    # Decode: T in 1..4, n in 1..64, S in n..32n (8192 KV blocks never bind).
    assert report.decode_states == 4 * sum(32 * n - n + 1 for n in range(1, 65))
    # Prompt: q in 1..2048 with ctx 0..ceil((4096 - 1 - q) / 128).
    assert report.prompt_states == sum(math.ceil((4095 - q) / 128) + 1 for q in range(1, 2049))
    counts = [u.states for u in report.uncovered]
    assert counts == sorted(counts, reverse=True)
    assert not report.covered
    assert report.uncovered_states == sum(counts)
    assert report.to_dict(top=3)["uncovered_shapes"] == len(report.uncovered)


def test_big_config_counts_without_enumeration() -> None:
    """max_num_seqs 256, max_model_len 131072, block 128, k=4: ~1.7e8 decode states."""
    cfg = EngineShapeConfig(
        max_num_seqs=256,
        max_model_len=131072,
        max_num_batched_tokens=8192,
        num_gpu_blocks=16384,
        num_speculative_tokens=4,
    )
    shared = prove_coverage(plan_buckets(cfg))
    assert shared.decode_states == 5 * sum(1024 * n - n + 1 for n in range(1, 257))
    exclusive = prove_coverage(plan_buckets(cfg), prefix_caching=False)
    bound = sum(max(0, min(1024 * n, 16384) - n + 1) for n in range(1, 257))
    assert exclusive.decode_states == 5 * bound


def test_contiguous_pa_space_reaches_every_block_id() -> None:
    """With contiguous PA, S is the highest block id + 1: n..num_gpu_blocks for every n."""
    cfg = EngineShapeConfig(**{**CONFIG_A, "num_gpu_blocks": 300}, contiguous_pa=True)
    report = prove_coverage(plan_buckets(cfg), prefix_caching=True)  # forced off by contiguous PA
    assert report.decode_states == sum(300 - n + 1 for n in range(1, 65))
    assert report.space.prefix_caching is False


@pytest.mark.parametrize(("mml", "block", "mbt"), [(64, 8, 64), (70, 16, 40), (100, 32, 100)])
def test_prompt_space_is_what_vllm_schedules(mml: int, block: int, mbt: int) -> None:
    """(query, ceil(computed / block)) over vLLM's rules, enumerated token by token.

    A request's first chunk starts after its prefix-cache hit (whole blocks), and a prompt has
    at most mml tokens (recent vLLM rejects mml itself too); every later chunk is a running
    request's, trimmed to mml - 1 - computed (``Scheduler.schedule``). Both under the budget.
    """
    reachable = set()
    for computed in range(mml):
        for query in range(1, mbt + 1):
            first = computed % block == 0 and computed + query <= mml
            if first or computed + query <= mml - 1:
                reachable.add((query, -(-computed // block)))
    cfg = EngineShapeConfig(
        max_num_seqs=1, max_model_len=mml, max_num_batched_tokens=mbt, block_size=block
    )
    space = StateSpace.of(cfg, partial_drafts=True)
    assert {(q, c) for _, q, c in space.prompt_candidates()} == reachable


def test_a_chunk_after_17_blocks_runs_a_bucket_warmup_never_compiles() -> None:
    """Config A: 1921 tokens after 2049-2174 computed ones pad to (1, 2048, 31), whose warmup
    dummy runs 16 context blocks and compiles (1, 2048, 16) instead (docs/coverage.md)."""
    plan = plan_buckets(_config_a(0))
    assert plan.prompt_shape(1, 1921, 17) == (1, 2048, 31)
    assert (1, 2048, 31) in plan.prompt_buckets
    report = prove_coverage(plan)
    (gap,) = [u for u in report.uncovered if u.shape == (1, 2048, 31)]
    assert gap.phase == "prompt"
    assert gap.example == (1, 1665, 17)  # the lexicographically smallest state running it
    # q in 1665..2046, ctx from 17 up to ceil((4095 - q) / 128): 19, 18, then 17.
    assert gap.states == sum(math.ceil((4095 - q) / 128) - 16 for q in range(1665, 2047))
    assert gap in brute_force_coverage(plan).uncovered
