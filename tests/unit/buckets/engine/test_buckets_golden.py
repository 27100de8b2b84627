"""Plans against the reference doc's Appendix lists and section 6 count and fingerprint tables."""

from __future__ import annotations

from typing import Any

import pytest
from bucket_golden import Bucket, bucket_list, config, tables

from warmgate.buckets import BucketPlan, plan_buckets


def _decode_fp(buckets: list[Bucket]) -> list[int]:
    return [len(buckets), sum(b[0] for b in buckets), sum(b[2] for b in buckets)]


def _prompt_fp(buckets: list[Bucket]) -> list[int]:
    return [len(buckets), sum(b[1] for b in buckets), sum(b[2] for b in buckets)]


def _plan(name: str, **kwargs: Any) -> BucketPlan:
    return plan_buckets(config(name, **kwargs))


A_QUERIES = [128, 256, 384, 512, 768, 896, 1280, 1664, 2048]
A_CTX = [0, 1, 2, 4, 8, 16, 31]


@pytest.mark.parametrize("profile", ["v0.26.0", "main-2026-08"])
def test_a1_config_a_exp_seed_and_prompt(profile: str) -> None:
    plan = _plan("A", profile=profile)
    assert plan.prompt_buckets == [(1, q, c) for q in A_QUERIES for c in A_CTX]
    assert plan.seed_decode_buckets == bucket_list("A_exp_seed_decode")
    assert plan.decode_buckets == plan.seed_decode_buckets


@pytest.mark.parametrize("profile", ["v0.26.0", "main-2026-08"])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_a1_config_a_spec_expansion_adds_exactly_the_listed_buckets(profile: str, k: int) -> None:
    plan = _plan("A", num_speculative_tokens=k, profile=profile)
    seeds = bucket_list("A_exp_seed_decode")
    added = bucket_list(f"A_exp_k{k}_added")
    assert plan.seed_decode_buckets == seeds
    assert plan.decode_buckets == sorted(seeds + added)
    assert plan.spec_added == len(added)


@pytest.mark.parametrize("profile", ["v0.26.0", "main-2026-08"])
def test_a2_a4b_config_b(profile: str) -> None:
    plan = _plan("B", num_speculative_tokens=1, profile=profile)
    assert plan.prompt_buckets == bucket_list("B_exp_prompt")
    assert plan.seed_decode_buckets == bucket_list("B_exp_seed_decode")
    added = bucket_list("B_exp_k1_added")
    assert plan.decode_buckets == sorted(plan.seed_decode_buckets + added)


def test_a3_config_c() -> None:
    plan = _plan("C")
    assert plan.prompt_buckets == bucket_list("C_exp_prompt")
    assert plan.seed_decode_buckets == bucket_list("C_exp_seed_decode")


def test_a4_config_d() -> None:
    plan = _plan("D")
    assert plan.prompt_buckets == bucket_list("D_exp_prompt")
    assert plan.seed_decode_buckets == bucket_list("D_exp_seed_decode")


def test_a5_config_d_release_has_no_3x_clamp() -> None:
    plan = _plan("D", profile="v0.26.0")
    assert plan.seed_decode_buckets == bucket_list("D_exp_v0.26.0_seed_decode")
    assert plan.prompt_buckets == bucket_list("D_exp_prompt")


def test_default_profile_is_the_release() -> None:
    plan = plan_buckets(config("D", profile="v0.26.0"))
    fields = dict(tables()["configs"]["D"])
    assert plan_buckets(type(plan.config)(**fields)).digest == plan.digest


@pytest.mark.parametrize("profile", ["v0.26.0", "main-2026-08"])
def test_a6_config_a_lin(profile: str) -> None:
    assert _plan("A", strategy="lin", profile=profile).seed_decode_buckets == bucket_list(
        "A_lin_seed_decode"
    )


@pytest.mark.parametrize("profile", ["v0.26.0", "main-2026-08"])
def test_a7_config_a_contiguous_pa(profile: str) -> None:
    plan = _plan("A", contiguous_pa=True, profile=profile)
    assert plan.seed_decode_buckets == bucket_list("A_exp_cpa_seed_decode")


def test_contiguous_pa_multiplies_the_physical_column() -> None:
    # Section 3.5: (64,1,8192) -> (128,1,16384) for k=1.
    plan = _plan("A", contiguous_pa=True, num_speculative_tokens=1)
    assert (64, 1, 8192) in plan.seed_decode_buckets
    assert (128, 1, 16384) in plan.decode_buckets


def _k_plans(cfg: str, strategy: str, cpa: bool, profile: str) -> list[BucketPlan]:
    """The plans of one config for k = 0..3."""
    return [
        _plan(cfg, strategy=strategy, contiguous_pa=cpa, num_speculative_tokens=k, profile=profile)
        for k in range(4)
    ]


def _count_cases() -> list[Any]:
    cases = []
    for row in tables()["counts_head"]:
        cfg, strategy, cpa = row[:3]
        for profile in ("main-2026-08", "v0.26.0"):
            if profile == "v0.26.0" and cfg in ("C", "D") and strategy == "exp" and not cpa:
                continue  # the 3x clamp binds: release numbers are in counts_v0_26
            cases.append(pytest.param(profile, row, id=f"{profile}-{cfg}-{strategy}-{cpa}"))
    return cases


@pytest.mark.parametrize(("profile", "row"), _count_cases())
def test_section6_counts(profile: str, row: list[Any]) -> None:
    cfg, strategy, cpa, prompt, decode, top0, top3 = row
    plans = _k_plans(cfg, strategy, cpa, profile)
    assert [len(p.prompt_buckets) for p in plans] == [prompt] * 4
    assert [len(p.decode_buckets) for p in plans] == decode
    if top0 is not None:
        assert plans[0].decode_buckets[-1] == tuple(top0)
        assert plans[3].decode_buckets[-1] == tuple(top3)


@pytest.mark.parametrize(("cfg", "strategy", "cpa", "added"), tables()["spec_added_head"])
def test_section6_spec_added(cfg: str, strategy: str, cpa: bool, added: list[int]) -> None:
    plans = _k_plans(cfg, strategy, cpa, "main-2026-08")
    assert [p.spec_added for p in plans[1:]] == added


@pytest.mark.parametrize("row", tables()["counts_v0_26"])
def test_section6_release_counts(row: list[Any]) -> None:
    cfg, strategy, cpa, prompt, decode, top0 = row
    plans = _k_plans(cfg, strategy, cpa, "v0.26.0")
    assert len(plans[0].prompt_buckets) == prompt
    assert [len(p.decode_buckets) for p in plans] == decode
    assert plans[0].decode_buckets[-1] == tuple(top0)


@pytest.mark.parametrize("row", tables()["fingerprints"])
def test_section6_fingerprints(row: list[Any]) -> None:
    profile, cfg, strategy, cpa, prompt, decode = row
    plans = _k_plans(cfg, strategy, cpa, profile)
    assert [_prompt_fp(p.prompt_buckets) for p in plans] == [prompt] * 4
    assert [_decode_fp(p.decode_buckets) for p in plans] == decode


def test_pr624_validation_setup() -> None:
    expected = tables()["pr624"]
    plan = _plan("PR624", num_speculative_tokens=expected["k"])
    assert len(plan.prompt_buckets) == expected["prompt"]
    assert len(plan.seed_decode_buckets) == expected["seed_decode"]
    assert len(plan.decode_buckets) == expected["decode"]
    assert plan.decode_buckets[-1] == tuple(expected["largest"])


def test_section3_3_worked_check_config_a() -> None:
    # 96 (bs, blocks) pairs; bs <= blocks and min(blocks, 32 * bs) leave 43; bs 1 keeps 1 and 32.
    seeds = _plan("A").seed_decode_buckets
    assert len(seeds) == 43
    assert [b for b in seeds if b[0] == 1] == [(1, 1, 1), (1, 1, 32)]


def test_section6_prompt_closed_forms() -> None:
    b_queries = [128, 256, 384, 512, 768, 1024, 1536, 2048, 2944, 4096, 5888, 8192]
    b_expected = sorted(
        {(1, q, 0) for q in b_queries} | {(1, q, (8192 - q) // 128) for q in b_queries}
    )
    assert _plan("B").prompt_buckets == b_expected
    c_ctx = [0, 1, 2, 4, 8, 14, 27, 52, 100]
    c_expected = sorted(
        [(1, q, c) for q in b_queries for c in c_ctx]
        + [(1, q, (32768 - q) // 128) for q in b_queries]
    )
    assert _plan("C").prompt_buckets == c_expected
