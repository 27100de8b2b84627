"""The exact optimum of decode completion: its model agrees with the prover, and it bounds both
completions from below; padding figures agree with brute force (issue 15)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from support.engines import ngram_engines

from warmgate.buckets import EngineShapeConfig, complete_plan, plan_buckets, plan_diff
from warmgate.buckets.completion.complete import with_bucket_file
from warmgate.buckets.completion.optimum import OptimumUnavailable, optimal_seeds
from warmgate.buckets.completion.optimum_model import ModelUnavailable, build_model
from warmgate.buckets.completion.seeds import decode_seconds
from warmgate.buckets.coverage.padding import decode_padding
from warmgate.buckets.coverage.prove import prove_coverage
from warmgate.buckets.coverage.states import StateSpace
from warmgate.buckets.engine.bucket_file import format_bucket_file

pytest.importorskip("highspy", reason="highspy (the dev extra) solves the integer program")

# ngram: the optimum concerns decode seeds; a draft model would leave prefills no prompt bucket
# can serve (docs/coverage.md), which makes completion raise before any decode comparison.
TINY = {
    "max_num_seqs": 8,
    "max_model_len": 1024,
    "max_num_batched_tokens": 256,
    "speculative_method": "ngram",
}


def _tiny(strategy: str, k: int, blocks: int = 48) -> EngineShapeConfig:
    return EngineShapeConfig(
        **TINY, num_gpu_blocks=blocks, num_speculative_tokens=k, strategy=strategy
    )


def _decode_covered(
    cfg: EngineShapeConfig, seeds: list[tuple[int, int, int]], sharing: bool
) -> bool:
    plan = plan_buckets(cfg)
    text = format_bucket_file(plan.prompt_buckets, sorted({*plan.seed_decode_buckets, *seeds}), ())
    report = prove_coverage(plan_buckets(with_bucket_file(cfg, text)), prefix_caching=sharing)
    return not any(u.phase == "decode" for u in report.uncovered)


@settings(max_examples=60, deadline=None)
@given(cfg=ngram_engines((32, 64, 128), (1, 10), 10), sharing=st.booleans(), data=st.data())
def test_model_verdict_is_the_provers(
    cfg: EngineShapeConfig, sharing: bool, data: st.DataObject
) -> None:
    """Any set of candidate seeds: the row-maxima model and the prover give the same verdict."""
    try:
        model = build_model(
            plan_buckets(cfg), StateSpace.of(cfg, partial_drafts=True, prefix_caching=sharing)
        )
    except (ModelUnavailable, ValueError):
        assume(False)
        return
    candidates = sorted((b, 1, v) for b, values in model.values.items() for v in values)
    assume(candidates)
    seeds = data.draw(st.lists(st.sampled_from(candidates), max_size=6, unique=True))
    assert model.satisfied(seeds) == _decode_covered(cfg, seeds, sharing)


@pytest.mark.parametrize("strategy", ["exp", "lin", "pad"])
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("sharing", [True, False])
def test_optimum_is_covered_and_no_dearer_than_either_completion(
    strategy: str, k: int, sharing: bool
) -> None:
    cfg = _tiny(strategy, k)
    best = optimal_seeds(cfg, prefix_caching=sharing)
    assert _decode_covered(cfg, list(best.seeds), sharing)
    before = plan_buckets(cfg)
    for cheapest in (True, False):
        done = complete_plan(cfg, prefix_caching=sharing, cheapest=cheapest)
        cost = decode_seconds(plan_diff(before, done).added_decode)
        assert best.seconds <= cost + 1e-9
    assert best.seconds == pytest.approx(decode_seconds(best.decode))


def test_k1_needs_no_seed() -> None:
    """k=1 has no partial drafts: nothing to add, and the program has nothing to choose."""
    best = optimal_seeds(_tiny("exp", 1))
    assert best.seeds == ()
    assert best.seconds == 0


def test_out_of_scope_is_refused_with_the_reason() -> None:
    cfg = EngineShapeConfig(**TINY, num_gpu_blocks=48, num_speculative_tokens=2, contiguous_pa=True)
    with pytest.raises(OptimumUnavailable, match="contiguous PA"):
        optimal_seeds(cfg)


@settings(max_examples=40, deadline=None)
@given(cfg=ngram_engines((32, 64, 128), (1, 10), 10), sharing=st.booleans(), partial=st.booleans())
def test_padding_figures_are_brute_forces(
    cfg: EngineShapeConfig, sharing: bool, partial: bool
) -> None:
    try:
        plan = complete_plan(cfg, partial, prefix_caching=sharing)
    except ValueError:
        assume(False)
        return
    pad = decode_padding(plan, partial, prefix_caching=sharing)
    space = StateSpace.of(plan.config, partial_drafts=partial, prefix_caching=sharing)
    ratios = []
    for n, s, t in space.decode_states():
        virtual, _, ctx = plan.decode_shape(n, s, t)
        ratios.append((virtual / (n * t), ctx / (t * s)))
    assert pad.states == len(ratios)
    assert pad.mean_tokens == pytest.approx(sum(r for r, _ in ratios) / len(ratios))
    assert pad.mean_blocks == pytest.approx(sum(r for _, r in ratios) / len(ratios))
    assert pad.worst_tokens == pytest.approx(max(1.0, *(r for r, _ in ratios)))
    assert pad.worst_blocks == pytest.approx(max(1.0, *(r for _, r in ratios)))


@settings(max_examples=60, deadline=None)
@given(cfg=ngram_engines((32, 64, 128), (1, 10), 10), sharing=st.booleans())
def test_completion_never_pads_a_step_to_a_larger_batch(
    cfg: EngineShapeConfig, sharing: bool
) -> None:
    """The token-padding bound: completion only adds seed rows, so no step pads to a larger
    batch than in the engine's own plan. Two exceptions, both outside what the engine's seeds
    serve: a lookup that fell back (its bs is clamped at max_num_seqs, and warmup never compiled
    it), and a draft step that found no seed row and padded on the full list, whose spec rows
    can be smaller than a seed row completion adds (e.g. lin, mns 3: n=3 pads to spec row 3,
    then to an added seed row 4)."""
    try:
        before = plan_buckets(cfg)
        after = complete_plan(cfg, prefix_caching=sharing)
    except ValueError:
        assume(False)
        return
    space = StateSpace.of(cfg, partial_drafts=True, prefix_caching=sharing)
    seeds = set(before.seed_decode_buckets)
    for n, s, t in space.decode_states():
        old = before.decode_step(n, s, t)
        if not old.batch.fallback and (t == 1 or old.batch.bucket in seeds):
            assert after.decode_shape(n, s, t)[0] <= old.shape[0], (n, s, t)
