"""Structured outputs and the drafter model (issue 25 item 4), against a brute force.

With structured-output requests in a step, vllm-gaudi gives every prefill chunk one logit, also
one that does not complete its prompt (``_extract_prefill_batch_contents``: "Always have at least
1 logit when using async scheduling or structured output", hpu_model_runner.py 2615-2625 at
v0.26.0, 2667-2677 at main), samples it ("Deal with the case of incomplete prompt", 4560-4575 /
4615-4630) and the drafter runs ``propose_eagle_prefill`` on that chunk (7098-7120 / 7173-7195);
and vLLM's ``update_draft_token_ids`` truncates drafts to the prefix the grammar accepts
(``grammar.validate_tokens``), so a decode step carries 0..k drafts at any position.

The reference here enumerates, from those lines: every prefill chunk vLLM's scheduler can form
(computed tokens c, scheduled q <= max_num_batched_tokens, c + q <= max_model_len - 1 for a chunk
that leaves tokens, <= max_model_len for the last; c a whole number of cached blocks or the sum of
earlier chunks) with the drafter's call 1 on the chunk's prompt shape and calls 2..k over
ceil((c + q + j - 1) / block) blocks; and every decode realisation with any number of drafts
(``drafter_sim``). ``prove_drafter(..., structured_outputs=True)`` must list exactly those graphs,
each as reached by ordinary traffic, whatever ``partial_drafts`` says.
"""

from __future__ import annotations

from typing import Any

import pytest
from drafter_sim import EngineCalls, brute_force_drafter

from warmgate.buckets import BucketPlan, EngineShapeConfig, plan_buckets
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import REASONS, plan_sweep

Key = tuple[str, tuple[int, int, int]]


def chunk_graphs(plan: BucketPlan) -> set[Key]:
    """Every drafter graph of every prefill chunk with structured outputs (bs-1 batches)."""
    cfg = plan.config
    calls = EngineCalls(plan)
    mml, mbt, block = cfg.max_model_len, cfg.max_num_batched_tokens, cfg.block_size
    out: set[Key] = set()
    for computed in range(mml):
        for query in range(1, min(mbt, mml - computed) + 1):
            end = computed + query  # a partial chunk ends by mml - 1, the last chunk by mml
            ctx = -(-computed // block)
            out.update(key for _, key in calls.prefill(end, query, ctx))
    return out


def structured_brute_force(plan: BucketPlan, prefix_caching: bool) -> dict[Key, bool]:
    """Graph -> reached by ordinary traffic (always, with structured outputs)."""
    space = StateSpace.of(plan.config, partial_drafts=True, prefix_caching=prefix_caching)
    decode = brute_force_drafter(plan, space)  # any draft count: grammar truncation
    graphs = set(decode) | chunk_graphs(plan)
    return dict.fromkeys(graphs, True)


def _engine(mns: int, mml: int, mbt: int, block: int, **extra: Any) -> EngineShapeConfig:
    return EngineShapeConfig(
        max_num_seqs=mns,
        max_model_len=mml,
        max_num_batched_tokens=mbt,
        block_size=block,
        **extra,
    )


CASES = {
    "exp": _engine(4, 64, 32, 8),
    "odd-len": _engine(3, 70, 64, 16),
    "tight-kv": _engine(5, 40, 32, 8, num_gpu_blocks=9),
    "chunked": _engine(3, 48, 16, 8),  # prompts longer than the token budget: many chunks
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("prefix_caching", [True, False])
def test_structured_outputs_graphs_match_the_brute_force(
    name: str, k: int, prefix_caching: bool
) -> None:
    """Whatever partialDrafts says (False here): with structured outputs the drafter runs every
    graph of partial drafts and of every prefill chunk, and each is ordinary traffic. Before
    issue 25 the model followed partial_drafts=False and left the grammar-truncated steps out."""
    plan = plan_buckets(CASES[name].model_copy(update={"num_speculative_tokens": k}))
    report = prove_drafter(
        plan,
        "eagle3",
        partial_drafts=False,
        prefix_caching=prefix_caching,
        structured_outputs=True,
    )
    model = {s.key: report.ordinary(s) for s in report.shapes}
    assert model == structured_brute_force(plan, prefix_caching)
    assert report.space.partial_drafts is True


def test_partial_chunks_add_no_graph_a_completing_chunk_lacks() -> None:
    """The finding behind the model's prompt side: a chunk that leaves tokens has the (query,
    ctx) and the end of a completing chunk of a shorter prompt, so structured outputs add no
    prefill graph for prompt batches of one request; they only make every one of them reached
    on every chunk."""
    plan = plan_buckets(CASES["chunked"].model_copy(update={"num_speculative_tokens": 3}))
    without = prove_drafter(plan, "eagle3", partial_drafts=True, structured_outputs=False)
    with_so = prove_drafter(plan, "eagle3", partial_drafts=True, structured_outputs=True)
    assert {s.key for s in without.shapes} == {s.key for s in with_so.shapes}
    assert not all(without.ordinary(s) for s in without.shapes)  # partial drafts: rare
    assert all(with_so.ordinary(s) for s in with_so.shapes)


def test_the_sweep_names_structured_outputs_for_what_it_cannot_drive() -> None:
    cfg = EngineShapeConfig(
        max_num_seqs=8,
        max_model_len=4096,
        max_num_batched_tokens=2048,
        num_gpu_blocks=8192,
        num_speculative_tokens=3,
    )
    plan = plan_buckets(cfg)
    report = prove_drafter(plan, "eagle3", structured_outputs=True)
    reasons = {why for _, why in plan_sweep(plan, report).spec.undriven}
    assert REASONS["structured"] in reasons
    assert REASONS["partial"] not in reasons
