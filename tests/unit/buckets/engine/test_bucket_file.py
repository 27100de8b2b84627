"""VLLM_BUCKETING_FROM_FILE parsing, seed-only export and re-planning (reference doc 2.6)."""

from __future__ import annotations

import pytest
from bucket_golden import Bucket, bucket_list, config

from warmgate.buckets import BucketPlanError, format_bucket_file, parse_bucket_file, plan_buckets

A_QUERIES = [128, 256, 384, 512, 768, 896, 1280, 1664, 2048]
A_PROMPT = [(1, q, c) for q in A_QUERIES for c in [0, 1, 2, 4, 8, 16, 31]]


def _lines(buckets: list[Bucket]) -> str:
    """One plain tuple per line, written without warmgate's formatter."""
    return "\n".join(f"({b}, {q}, {c})" for b, q, c in buckets) + "\n"


def test_doc_examples_of_the_format() -> None:
    parsed = parse_bucket_file("([64,128,256], 1, range(512, 1024, 32))\n")
    assert len(parsed.decode) == 3 * 16
    assert parsed.decode[0] == (64, 1, 512)
    assert parsed.decode[-1] == (256, 1, 992)
    # The docs claim 3 buckets; Python's exclusive stop gives 2.
    assert parse_bucket_file("(1, 1, range(256, 512, 128))").decode == [(1, 1, 256), (1, 1, 384)]


def test_upstream_sample_file() -> None:
    text = """# This is a sample bucketing file
# (1, [256, 512], [0, 4, 8])

(1, 2048, 0)
(1, [256, 512], [0, 4, 8])

(64, 1, 1024)
(32, 1, 512)
(1, 1, 256)
"""
    parsed = parse_bucket_file(text)
    assert len(parsed.prompt) == 7
    assert parsed.decode == [(1, 1, 256), (32, 1, 512), (64, 1, 1024)]
    assert parsed.skipped == []


def test_bad_lines_are_skipped_with_a_reason() -> None:
    text = (
        "hello\n(1, 2)\n(1, 'a', 3)\n(1, 1, range(0, 20000))\n(1, 1, range(1, 9, 0))\n(2, 1, 4)\n"
    )
    parsed = parse_bucket_file(text)
    assert parsed.decode == [(2, 1, 4)]
    assert [n for n, _, _ in parsed.skipped] == [1, 2, 3, 4, 5]


def test_query_one_means_decode() -> None:
    parsed = parse_bucket_file("(4, [1, 128], 16)\n")
    assert parsed.decode == [(4, 1, 16)]
    assert parsed.prompt == [(4, 128, 16)]


def test_seed_file_reproduces_the_strategy_plan_k1() -> None:
    # Doc: a file of exactly the 63 prompt and 43 seed buckets, k=1 -> the same 105 buckets.
    seeds = bucket_list("A_exp_seed_decode")
    text = _lines(A_PROMPT) + _lines(seeds)
    from_file = plan_buckets(config("A", num_speculative_tokens=1, bucket_file=text))
    assert from_file.decode_buckets == sorted(seeds + bucket_list("A_exp_k1_added"))
    assert len(from_file.decode_buckets) == 105
    assert from_file.prompt_buckets == A_PROMPT


def test_already_expanded_file_expands_again_to_187() -> None:
    expanded = sorted(bucket_list("A_exp_seed_decode") + bucket_list("A_exp_k1_added"))
    text = _lines(A_PROMPT) + _lines(expanded)
    plan = plan_buckets(config("A", num_speculative_tokens=1, bucket_file=text))
    assert len(plan.decode_buckets) == 187
    assert max(b for b, _, _ in plan.decode_buckets) == 256


def test_file_buckets_are_filtered_and_corrected() -> None:
    text = "(1, 128, 0)\n(1, 4096, 0)\n(1, 1, 64)\n(8, 1, 4)\n(2, 1, 64)\n"
    plan = plan_buckets(config("A", bucket_file=text))
    assert plan.prompt_buckets == [(1, 128, 0)]
    assert plan.omitted_prompt == ((1, 4096, 0),)  # 1 * 4096 > 2048 batched tokens
    assert plan.seed_decode_buckets == [(1, 1, 32), (2, 1, 64)]  # (1, 1, 64) corrected to 32
    assert plan.omitted_decode == ((8, 1, 4),)  # bs > blocks


def test_file_without_prompt_buckets_is_refused() -> None:
    with pytest.raises(BucketPlanError, match="0 prompt buckets"):
        plan_buckets(config("A", bucket_file="(1, 1, 64)\n"))


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"num_speculative_tokens": 2},
        {"contiguous_pa": True, "num_speculative_tokens": 1},
        {"strategy": "lin", "num_speculative_tokens": 3},
        {"strategy": "pad"},
        {"merged_prefill": True},
    ],
)
@pytest.mark.parametrize("name", ["A", "B", "C", "D"])
def test_to_bucket_file_round_trips(name: str, kwargs: dict[str, object]) -> None:
    plan = plan_buckets(config(name, **kwargs))
    again = plan_buckets(config(name, bucket_file=plan.to_bucket_file(), **kwargs))
    assert again.prompt_buckets == plan.prompt_buckets
    assert again.seed_decode_buckets == plan.seed_decode_buckets
    assert again.decode_buckets == plan.decode_buckets
    assert again.digest == plan.digest
    assert again.omitted_prompt == again.omitted_decode == ()


def test_query_one_prompt_buckets_cannot_be_written() -> None:
    plan = plan_buckets(config("A", prompt_query_bucket_min_one=True))
    assert (1, 1, 0) in plan.prompt_buckets
    with pytest.raises(ValueError, match="query 1"):
        plan.to_bucket_file()


def test_format_rejects_decode_rows_with_a_query() -> None:
    with pytest.raises(ValueError, match="query 1"):
        format_bucket_file([], [(1, 2, 3)])


def test_merged_file_buckets_above_the_token_budget_are_planned_but_not_warmed() -> None:
    text = "(1, 4096, 0)\n(1, 128, 0)\n(1, 1, 64)\n"
    plan = plan_buckets(config("A", merged_prefill=True, bucket_file=text))
    assert plan.prompt_buckets == [(1, 128, 0), (1, 4096, 0)]
    assert plan.warmed_prompt_buckets == [(1, 128, 0)]
    assert plan_buckets(config("A")).warmed_prompt_buckets == A_PROMPT
