"""EngineShapeConfig validation, engine refusals, knobs and the digest."""

from __future__ import annotations

import pytest
from bucket_golden import config
from pydantic import ValidationError

from warmgate.buckets import BucketOverrides, BucketPlanError, EngineShapeConfig, plan_buckets

BASE = {"max_num_seqs": 64, "max_model_len": 4096, "max_num_batched_tokens": 2048}


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_num_seqs", 0),
        ("max_model_len", -1),
        ("block_size", 0),
        ("num_gpu_blocks", 0),
        ("num_speculative_tokens", -1),
        ("strategy", "linear"),
        ("profile", "v0.25.0"),
        ("prompt_bs_max", 0),
    ],
)
def test_invalid_values_name_the_field(field: str, value: object) -> None:
    with pytest.raises(ValidationError) as info:
        EngineShapeConfig(**{**BASE, field: value})
    assert info.value.errors()[0]["loc"] == (field,)


def test_unknown_fields_are_rejected() -> None:
    with pytest.raises(ValidationError, match="max_num_seq"):
        EngineShapeConfig(**BASE, max_num_seq=3)


def test_config_is_frozen() -> None:
    cfg = EngineShapeConfig(**BASE)
    with pytest.raises(ValidationError):
        cfg.max_num_seqs = 3  # type: ignore[misc]


def test_defaults() -> None:
    cfg = EngineShapeConfig(**BASE)
    assert (cfg.profile, cfg.strategy, cfg.block_size, cfg.num_speculative_tokens) == (
        "v0.26.0",
        "exp",
        128,
        0,
    )
    assert cfg.max_num_prefill_seqs == 1


def test_contiguous_pa_needs_the_block_count() -> None:
    with pytest.raises(ValidationError, match="num_gpu_blocks"):
        EngineShapeConfig(**BASE, contiguous_pa=True)


def test_conflicting_query_min_is_refused() -> None:
    with pytest.raises(ValidationError, match="prompt_query_min"):
        EngineShapeConfig(
            **BASE,
            prompt_query_bucket_min_one=True,
            overrides=BucketOverrides(prompt_query_min=64),
        )


def test_engine_refusal_when_every_bucket_is_filtered() -> None:
    # Every exp query (128 and up) is longer than the 100-token model.
    with pytest.raises(BucketPlanError, match="0 prompt buckets"):
        plan_buckets(EngineShapeConfig(**{**BASE, "max_model_len": 100}))


def test_engine_refusal_of_an_inverted_range() -> None:
    # lin asserts min <= max: query min 128 > max 64.
    with pytest.raises(BucketPlanError, match="min 128 is greater than max 64"):
        plan_buckets(EngineShapeConfig(**{**BASE, "max_num_batched_tokens": 64}, strategy="lin"))


def test_overrides_from_env_names() -> None:
    ov = BucketOverrides.from_env({"VLLM_DECODE_BS_BUCKET_STEP": "16"})
    assert ov.decode_bs_step == 16
    assert (
        BucketOverrides.env_name("prompt_query_pad_percent")
        == "VLLM_PROMPT_QUERY_BUCKET_PAD_PERCENT"
    )
    with pytest.raises(ValueError, match="VLLM_NOPE"):
        BucketOverrides.from_env({"VLLM_NOPE": "1"})
    with pytest.raises(ValidationError, match="decode_block_pad_percent"):
        BucketOverrides(decode_block_pad_percent=60)


def test_lin_overrides_change_the_decode_rows() -> None:
    plan = plan_buckets(config("A", strategy="lin", overrides=BucketOverrides(decode_bs_step=16)))
    assert sorted({b for b, _, _ in plan.seed_decode_buckets}) == [1, 2, 4, 8, 16, 32, 48, 64]


def test_exp_ignores_per_dimension_overrides() -> None:
    plain = plan_buckets(config("A"))
    ov = BucketOverrides(decode_bs_step=16, decode_block_max=100)
    assert plan_buckets(config("A", overrides=ov)).digest == plain.digest


def test_query_min_one_adds_query_one_under_exp() -> None:
    plan = plan_buckets(config("A", prompt_query_bucket_min_one=True))
    assert sorted({q for _, q, _ in plan.prompt_buckets})[:2] == [1, 128]


def test_prompt_bs_max_widens_prompt_batches() -> None:
    plan = plan_buckets(config("A", prompt_bs_max=4))
    assert sorted({b for b, _, _ in plan.prompt_buckets}) == [1, 2, 4]
    assert all(b * q <= 2048 for b, q, _ in plan.prompt_buckets)


def test_prompt_ctx_bucket_max_caps_the_edge_rule_stickily() -> None:
    # Config C edge values are (32768 - q) // 128 = 255 .. 192; with a cap of 250 the edge
    # rule fails for q <= 768 and ctx stays at the column max (192) until it passes.
    plan = plan_buckets(config("C", prompt_ctx_bucket_max=250))
    edge = {q: c for _, q, c in plan.prompt_buckets if c >= 100 and c != 100}
    assert edge[128] == 192
    assert edge[1024] == 248
    assert edge[8192] == 192


def test_merged_prefill_uses_one_prompt_row() -> None:
    plan = plan_buckets(config("A", merged_prefill=True))
    assert {b for b, _, _ in plan.prompt_buckets} == {1}
    assert max(c for _, _, c in plan.prompt_buckets) > 31  # ctx scaled by max_num_seqs


def test_skip_decode_block_clamp_restores_the_release_range() -> None:
    head = plan_buckets(config("D", skip_decode_block_clamp=True))
    release = plan_buckets(config("D", profile="v0.26.0"))
    assert head.seed_decode_buckets == release.seed_decode_buckets


def test_digest_depends_on_profile_and_lists_only() -> None:
    a = plan_buckets(config("A"))
    assert a.digest == plan_buckets(config("A")).digest
    assert len(a.digest) == 64
    # Same lists, different profile -> different digest.
    assert a.digest != plan_buckets(config("A", profile="v0.26.0")).digest
    # Same profile and lists, different fallback inputs -> same digest.
    assert a.digest == plan_buckets(config("A", num_gpu_blocks=4096)).digest
    assert a.digest != plan_buckets(config("A", num_speculative_tokens=1)).digest


def test_to_dict_is_json_ready() -> None:
    data = plan_buckets(config("A", num_speculative_tokens=1)).to_dict()
    assert data["counts"] == {"prompt": 63, "seed_decode": 43, "decode": 105, "spec_added": 62}
    assert data["config"]["max_num_seqs"] == 64
