"""Worked examples of the drafter's graphs, the issue's example included, and the model's edges."""

from __future__ import annotations

import json

import pytest
from drafter_sim import EngineCalls
from support.engines import CONFIG_A

from warmgate.buckets import EngineShapeConfig, plan_buckets, prove_coverage
from warmgate.buckets.drafter.graphs import DrafterModelError, prove_drafter

# Issue 16's example: exp defaults, max_num_seqs 8, block 128, max_model_len 4096, k=3.
ISSUE = EngineShapeConfig(
    max_num_seqs=8, max_model_len=4096, max_num_batched_tokens=2048, num_speculative_tokens=3
)
# The reference doc's config A with k=3.
CONFIG_A_K3 = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=3)


def test_issue_example_three_requests_of_300_tokens() -> None:
    """3 x 300 tokens: b_i = ceil(301 / 128) = 3, S = 9, T = 4 (full drafts).

    Target: seed lookup (3, 9) -> B = 4; block lookup (16, 36) -> (16, 1, 48), planned and warmed.
    Drafter: call 1 reuses the target's metadata -> (16, 1, 48); calls 2 and 3 run the padded
    batch B = 4 over ceil((300 + a + j) / 128) = 3 blocks each (300 + 3 + 3 < 384), X = 9 ->
    find_decode_bucket(4, 9) = (4, 1, 16), twice, whatever the acceptance a.
    """
    plan = plan_buckets(ISSUE)
    step = plan.decode_step(3, 9, 4)
    assert (step.shape, step.padded_batch, step.warmed) == ((16, 1, 48), 4, True)
    for accepted in range(4):
        calls = EngineCalls(plan).decode([(300, 3, accepted)] * 3)
        assert calls == [
            ("decode-first", ("decode", (16, 1, 48))),
            ("decode-next", ("decode", (4, 1, 16))),
            ("decode-next", ("decode", (4, 1, 16))),
        ]
    report = prove_drafter(plan, "eagle3")
    shapes = {s.key: s for s in report.shapes}
    for key in (("decode", (16, 1, 48)), ("decode", (4, 1, 16))):
        assert key in shapes
        assert not shapes[key].warmed  # the engine's warmup never runs the drafter at it
    assert "decode-next" in shapes[("decode", (4, 1, 16))].calls


def test_acceptance_moves_the_follow_up_bucket() -> None:
    """Config A, 8 requests: S = 8 * 24 = 192, T = 4, B = 8, call 1 (32, 1, 768).

    At 3000 tokens calls 2..3 never leave block 24 (3000 + 3 + 3 < 3072): X = 192 -> (8, 1, 192).
    At 3071 tokens call 2 crosses into block 25 for every request: X = 200 -> (8, 1, 256).
    """
    plan = plan_buckets(CONFIG_A_K3)
    calls = EngineCalls(plan)
    assert calls.decode([(3000, 3, 3)] * 8) == [
        ("decode-first", ("decode", (32, 1, 768))),
        ("decode-next", ("decode", (8, 1, 192))),
        ("decode-next", ("decode", (8, 1, 192))),
    ]
    assert calls.decode([(3071, 3, 0)] * 8)[1] == ("decode-next", ("decode", (8, 1, 256)))
    shapes = {s.key: s for s in prove_drafter(plan, "eagle").shapes}
    assert {("decode", (8, 1, 192)), ("decode", (8, 1, 256))} <= shapes.keys()


def test_config_a_counts_and_what_warmup_compiles() -> None:
    """Config A, k=3: the prompt warmup compiles the drafter's prompt shapes and two batch-1
    follow-ups, (1, 1, 1) and (1, 1, 32); its decode buckets never run the drafter."""
    report = prove_drafter(plan_buckets(CONFIG_A_K3), "eagle")
    assert sorted(key for key in report.warmup if key[0] == "decode") == [
        ("decode", (1, 1, 1)),
        ("decode", (1, 1, 32)),
    ]
    assert (len(report.shapes), len(report.unwarmed)) == (280, 216)
    assert report.to_dict()["by_call"] == {
        "prompt-first": 69,
        "prompt-next": 2,
        "decode-first": 190,
        "decode-next": 45,
    }


def test_k1_has_no_follow_up_calls() -> None:
    """With k=1 propose() returns after call 1 (hpu_eagle.py:59-61)."""
    cfg = CONFIG_A_K3.model_copy(update={"num_speculative_tokens": 1})
    report = prove_drafter(plan_buckets(cfg), "mtp")
    assert report.count("decode-next") == report.count("prompt-next") == 0
    assert report.count("decode-first") > 0


def test_methods_without_drafter_graphs() -> None:
    plan = plan_buckets(CONFIG_A_K3)
    ngram = prove_drafter(plan, "ngram")
    assert (ngram.shapes, ngram.has_drafter) == ((), False)
    assert "CPU" in ngram.note
    no_spec = prove_drafter(
        plan_buckets(CONFIG_A_K3.model_copy(update={"num_speculative_tokens": 0})), "eagle"
    )
    assert no_spec.shapes == ()


def test_eagle3_notes_combine_hidden_states() -> None:
    assert "combine_hidden_states" in prove_drafter(plan_buckets(ISSUE), "eagle3").note


@pytest.mark.parametrize("update", [{"prompt_bs_max": 2}, {"merged_prefill": True}])
def test_prompt_batches_of_several_requests_are_refused(update: dict[str, object]) -> None:
    plan = plan_buckets(ISSUE.model_copy(update=update))
    with pytest.raises(DrafterModelError, match="prompt_bs_max > 1 or merged_prefill"):
        prove_drafter(plan, "eagle")


def test_unknown_method_is_refused() -> None:
    with pytest.raises(DrafterModelError, match="method must be one of"):
        prove_drafter(plan_buckets(ISSUE), "medusa")  # type: ignore[arg-type]


def test_contiguous_pa_follow_ups_take_the_highest_block_id() -> None:
    """Contiguous PA: warmup dummies put every block at id 0 (X = 1), runtime block ids are any
    up to the KV blocks, and the bucket is max(C, X) (capped at num_gpu_blocks + 1 on main)."""
    cfg = EngineShapeConfig(
        max_num_seqs=8,
        max_model_len=1024,
        max_num_batched_tokens=512,
        num_gpu_blocks=64,
        num_speculative_tokens=2,
        contiguous_pa=True,
    )
    report = prove_drafter(plan_buckets(cfg), "mtp")
    assert sorted(key for key in report.warmup if key[0] == "decode") == [("decode", (1, 1, 1))]
    batch_one = {s.shape[2] for s in report.shapes if s.shape[0] == 1 and s.phase == "decode"}
    assert max(batch_one) <= 65
    assert ("decode", (1, 1, 8)) in {s.key for s in report.unwarmed}


def test_report_is_json_and_prompt_configs_multiply() -> None:
    report = prove_drafter(plan_buckets(ISSUE), "eagle3")
    data = json.loads(json.dumps(report.to_dict(top=5)))
    assert data["unwarmed_shapes"] == len(report.unwarmed) == 121
    assert len(data["unwarmed"]) == 5
    prompt = next(s for s in report.shapes if s.phase == "prompt")
    assert prompt.engine_config == ("prompt", 1, prompt.shape[1], prompt.shape[2])


def test_the_target_proof_is_the_same_with_a_method_and_names_no_drafter() -> None:
    """The drafter is proven apart (prove_drafter); a method changes only the prompt dummies."""
    plan = plan_buckets(ISSUE)
    target = prove_coverage(plan)
    both = prove_coverage(plan, method="eagle3")
    assert (both.uncovered, both.states, both.covered) == (
        target.uncovered,
        target.states,
        target.covered,
    )
    assert "drafter" not in both.to_dict()
    assert prove_drafter(plan, "eagle3").to_dict()["unwarmed_shapes"] == 121
