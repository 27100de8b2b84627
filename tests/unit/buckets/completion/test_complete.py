"""Plan completion ends covered, keeps every original bucket, and survives its own seed file."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from warmgate.buckets import (
    BucketPlan,
    CompletionError,
    EngineShapeConfig,
    complete_plan,
    plan_buckets,
    plan_diff,
    prove_coverage,
)
from warmgate.buckets.completion.complete import LOCAL_FIX_SHAPES, UnwarmableError, with_bucket_file
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.warmup_shapes import warmed_prompt_shapes

DOC_CONFIGS: dict[str, dict[str, Any]] = {
    "A": {"max_num_seqs": 64, "max_model_len": 4096, "max_num_batched_tokens": 2048},
    "B": {"max_num_seqs": 128, "max_model_len": 8192, "max_num_batched_tokens": 8192},
    "D": {"max_num_seqs": 128, "max_model_len": 32768, "max_num_batched_tokens": 2048},
}
BLOCKS = {"A": 8192, "B": 8192, "D": 2000}


def _keeps_everything(before: BucketPlan, after: BucketPlan) -> None:
    assert set(before.prompt_buckets) <= set(after.prompt_buckets)
    assert set(before.seed_decode_buckets) <= set(after.seed_decode_buckets)
    assert set(before.decode_buckets) <= set(after.decode_buckets)


def _replans_to_itself(plan: BucketPlan) -> None:
    again = plan_buckets(with_bucket_file(plan.config, plan.to_bucket_file()))
    assert again.decode_buckets == plan.decode_buckets
    assert again.prompt_buckets == plan.prompt_buckets


@pytest.mark.parametrize("name", sorted(DOC_CONFIGS))
@pytest.mark.parametrize("k", [0, 1, 2, 3])
@pytest.mark.parametrize("method", ["ngram", "eagle3"])
def test_completion_of_doc_configs(name: str, k: int, method: str) -> None:
    cfg = EngineShapeConfig(
        **DOC_CONFIGS[name],
        num_gpu_blocks=BLOCKS[name],
        num_speculative_tokens=k,
        speculative_method=method,
    )
    before = plan_buckets(cfg)
    if method == "eagle3" and k >= 2:
        # The top query row holds its C0 and more: a chunk 2..k tokens short of it after just
        # over C0 blocks of context has no bucket the warmup compiles (docs/coverage.md).
        with pytest.raises(UnwarmableError) as caught:
            complete_plan(cfg, partial_drafts=True)
        after = caught.value.plan
        residual = caught.value.report
        assert {u.phase for u in residual.uncovered} == {"prompt"}
        assert residual.uncovered_states == k - 1
        top = max(q for _, q, _ in before.prompt_buckets)
        assert {u.shape[1] for u in residual.uncovered} == {top}
        assert all(top - k <= u.example[1] <= top - 2 for u in residual.uncovered)
    else:
        after = complete_plan(cfg, partial_drafts=True)
        assert prove_coverage(after, partial_drafts=True).covered
        _replans_to_itself(after)
    _keeps_everything(before, after)
    diff = plan_diff(before, after)
    assert diff.added == len(after.prompt_buckets) + len(after.decode_buckets) - len(
        before.prompt_buckets
    ) - len(before.decode_buckets)


def test_completion_adds_only_prompt_buckets_the_warmup_compiles() -> None:
    """Config A: (1, 2048, 31) never compiles, so the chunks that pad to it get a row at 2046
    (row 2048's buckets below 16, and 19 for the largest context); (126, 32) passes every row
    and gets (1, 129, 32) just above row 128. The old completion added (1, 128, 32), which the
    warmup never compiles either (its dummy runs 31 context blocks)."""
    cfg = EngineShapeConfig(
        **DOC_CONFIGS["A"],
        num_gpu_blocks=8192,
        num_speculative_tokens=1,
        speculative_method="ngram",
    )
    diff = plan_diff(plan_buckets(cfg), complete_plan(cfg))
    assert set(diff.added_prompt) == {
        (1, 129, 32),
        *((1, 2046, c) for c in (0, 1, 2, 4, 8, 19)),
    }
    done = complete_plan(cfg)
    assert done.prompt_shape(1, 1921, 17) == (1, 2046, 19)
    assert done.prompt_shape(1, 2047, 16) == (1, 2048, 16)
    assert done.prompt_shape(1, 100, 32) == (1, 129, 32)


def test_completion_adds_the_partial_draft_rows_of_section_5_3() -> None:
    """Config A, k=3: rows 24 (8 x T=3) and 72 (36 x T=2) become planned decode rows (as seeds
    of their own, or through the expansion of seeds 6 and 18 with T=4)."""
    cfg = EngineShapeConfig(
        **DOC_CONFIGS["A"],
        num_gpu_blocks=8192,
        num_speculative_tokens=3,
        speculative_method="ngram",
    )
    after = complete_plan(cfg)
    rows = {b for b, _, _ in after.decode_buckets} - {
        b for b, _, _ in plan_buckets(cfg).decode_buckets
    }
    assert {24, 72} <= rows
    assert after.decode_shape(8, 192, 3) in set(after.decode_buckets)
    assert after.decode_shape(30, 120, 2) in set(after.decode_buckets)


def test_full_drafts_only_needs_no_decode_buckets() -> None:
    cfg = EngineShapeConfig(
        **DOC_CONFIGS["A"],
        num_gpu_blocks=8192,
        num_speculative_tokens=3,
        speculative_method="ngram",
    )
    diff = plan_diff(plan_buckets(cfg), complete_plan(cfg, partial_drafts=False))
    assert not diff.added_seeds
    assert not diff.added_decode
    assert diff.added_prompt  # the long-context prompt gap is independent of drafts


def test_a_covered_plan_comes_back_unchanged() -> None:
    cfg = EngineShapeConfig(
        **DOC_CONFIGS["A"],
        num_gpu_blocks=8192,
        num_speculative_tokens=2,
        speculative_method="ngram",
    )
    done = complete_plan(cfg)
    again = complete_plan(done.config)
    assert again.decode_buckets == done.decode_buckets
    assert again.prompt_buckets == done.prompt_buckets
    assert plan_diff(done, again).added == 0


def test_user_seed_file_is_kept() -> None:
    """A user's sparse seed file: every line survives completion (no bucket is removed)."""
    text = "(1, 128, 0)\n(1, 512, [0, 4])\n(4, 1, [8, 64])\n(16, 1, 256)\n"
    cfg = EngineShapeConfig(
        max_num_seqs=16,
        max_model_len=2048,
        max_num_batched_tokens=512,
        num_gpu_blocks=400,
        num_speculative_tokens=2,
        bucket_file=text,
    )
    before = plan_buckets(cfg)
    after = complete_plan(cfg)
    _keeps_everything(before, after)
    assert prove_coverage(after).covered


@st.composite
def _small_configs(draw: st.DrawFn) -> EngineShapeConfig:
    block = draw(st.sampled_from([16, 32, 64, 128]))
    mml = draw(st.integers(2 * block, 32 * block))
    mbt = draw(st.integers(block, 4 * block))
    file = None
    if draw(st.booleans()):
        rows = draw(st.lists(st.tuples(st.integers(1, 20), st.integers(1, 200)), min_size=1))
        file = "\n".join([f"({b}, 1, {c})" for b, c in rows] + [f"(1, {min(mbt, mml)}, 0)"])
    contiguous = draw(st.booleans())
    blocks = draw(st.integers(1, 600) if contiguous else st.none() | st.integers(1, 600))
    return EngineShapeConfig(
        max_num_seqs=draw(st.integers(1, 20)),
        max_model_len=mml,
        max_num_batched_tokens=mbt,
        block_size=block,
        num_gpu_blocks=blocks,
        contiguous_pa=contiguous,
        num_speculative_tokens=draw(st.integers(0, 4)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
        profile=draw(st.sampled_from(["v0.26.0", "main-2026-08"])),
        bucket_file=file,
        speculative_method=draw(st.sampled_from([None, "ngram", "eagle3"])),
    )


def _unwarmed_prompts(plan: BucketPlan, space: StateSpace) -> set[tuple[int, int, int]]:
    warmed = warmed_prompt_shapes(plan)
    shapes = {s: plan.prompt_shape(*s) for s in space.prompt_candidates()}
    return {s for s, shape in shapes.items() if shape not in warmed and s[0] == 1}


def _the_engines_limit(caught: UnwarmableError) -> None:
    """What completion leaves, no bucket can fix.

    Prompt: for the LOCAL_FIX_SHAPES largest left-over shapes, no single prompt bucket at a
    residual prefill's query or up to 2k + 2 above it (the
    rows a dummy k tokens short could reach) serves some of them without another prefill running
    unwarmed instead: a row that close to a planned one catches that row's dummies, or its own
    are caught. Decode: only a planned bucket whose dummy loses a block at max_model_len
    (non-contiguous PA, a draft model's L = 1 + k lookahead, 1 <= mml - (ceil(mml / block) - 1)
    * block <= k).
    """
    plan, report = caught.plan, caught.report
    cfg = plan.config
    reach = max(cfg.prompt_dummy_shortenings())
    last = min(report.space.query_max(1), cfg.max_num_batched_tokens)
    tail = cfg.max_model_len - (cfg.max_blocks_per_seq - 1) * cfg.block_size
    base = _unwarmed_prompts(plan, report.space)
    for gap in report.uncovered[:LOCAL_FIX_SHAPES]:
        if gap.phase == "decode":
            assert gap.shape in plan.decode_buckets
            assert not cfg.contiguous_pa
            assert 1 <= tail <= reach
            continue
        _, query, ctx = gap.example
        for row in range(max(2, query), min(last, query + 2 * reach + 2) + 1):
            file = plan.to_bucket_file() + f"(1, {row}, {ctx})\n"
            trial = plan_buckets(with_bucket_file(cfg, file))
            assert not _unwarmed_prompts(trial, report.space) < base, (row, ctx)


@given(cfg=_small_configs(), partial=st.booleans(), sharing=st.none() | st.booleans())
# Found by Hypothesis: the stuck prefill (1, 65, 9) had no room for a row at 65 (one token from
# row 64), and completion gave up although a row at 66 takes it.
@example(
    cfg=EngineShapeConfig(
        max_num_seqs=1,
        max_model_len=323,
        max_num_batched_tokens=68,
        block_size=32,
        num_speculative_tokens=1,
        strategy="pad",
        profile="v0.26.0",
    ),
    partial=False,
    sharing=None,
)
def test_completion_always_ends_covered(
    cfg: EngineShapeConfig, partial: bool, sharing: bool | None
) -> None:
    """Covered, or only prefills no bucket the engine's warmup compiles can serve are left."""
    try:
        before = plan_buckets(cfg)
    except (ValueError, RuntimeError):
        assume(False)
        raise
    try:
        after = complete_plan(cfg, partial, prefix_caching=sharing)
    except UnwarmableError as caught:
        _the_engines_limit(caught)
        _keeps_everything(before, caught.plan)
        return
    assert prove_coverage(after, partial, prefix_caching=sharing).covered
    _keeps_everything(before, after)
    _replans_to_itself(after)


def test_query_one_prompt_buckets_cannot_be_completed() -> None:
    """VLLM_PROMPT_QUERY_BUCKET_MIN=1 plans hold query-1 prompt buckets, which a file cannot."""
    cfg = EngineShapeConfig(
        **DOC_CONFIGS["A"],
        num_gpu_blocks=8192,
        num_speculative_tokens=2,
        prompt_query_bucket_min_one=True,
    )
    with pytest.raises(CompletionError, match="query 1"):
        complete_plan(cfg)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("sharing", [True, False])
def test_completed_plan_is_warmed_step_by_step(k: int, sharing: bool) -> None:
    """Every decode step of a completed plan is ``warmed`` by the planner's own definition too:
    no lookup falls back, so the engine never appends a bucket at runtime (docs/coverage.md)."""
    cfg = EngineShapeConfig(
        max_num_seqs=12,
        max_model_len=1024,
        max_num_batched_tokens=256,
        block_size=64,
        num_gpu_blocks=90,
        num_speculative_tokens=k,
        bucket_file="(1, 256, [0, 2])\n(4, 1, 16)\n(12, 1, [32, 90])\n",
    )
    plan = complete_plan(cfg, prefix_caching=sharing)
    space = StateSpace.of(plan.config, partial_drafts=True, prefix_caching=sharing)
    steps = [plan.decode_step(n, s, t) for n, s, t in space.decode_states()]
    assert steps
    assert all(step.warmed for step in steps)
