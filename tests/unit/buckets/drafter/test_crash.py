"""The drafter's crashing states (issue 25 item 5) against an enumeration of the engine's code.

The reference below is written from the engine's lines, not from ``drafter_crash``: vLLM's
scheduler gives a decode at c computed tokens d = min(k, mml - 2 - c) drafts (fewer only by
choice: any d up to that), a of them accepted; ``HpuEagleProposer.propose`` call j then asks
``prepare_attn_metadata`` for ceil((c + a + j) / block) blocks of a table with ceil(mml / block)
columns (hpu_eagle.py 190-196, hpu_input_batch.py 122), and a prefill ending at L tokens for
ceil((L + j - 1) / block).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from warmgate.buckets import EngineShapeConfig
from warmgate.buckets.drafter.crash import drafter_crash


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def reference(mml: int, block: int, k: int) -> tuple[set[tuple[int, int, int]], set[int]]:
    """Every (c, d, a) of one decode sequence and every prefill length that fails the assert."""
    width = cdiv(mml, block)
    decode = {
        (c, d, a)
        for c in range(mml - 1)
        for d in range(k + 1)
        if c + d <= mml - 2
        for a in range(d + 1)
        if any(cdiv(c + a + j, block) > width for j in range(2, k + 1))
    }
    prompts = {
        length
        for length in range(1, mml)  # vLLM admits prompts up to max_model_len - 1
        if any(cdiv(length + j - 1, block) > width for j in range(2, k + 1))
    }
    return decode, prompts


def config(mml: int, block: int, k: int) -> EngineShapeConfig:
    return EngineShapeConfig(
        max_num_seqs=4,
        max_model_len=mml,
        max_num_batched_tokens=max(mml, 64),
        block_size=block,
        num_speculative_tokens=k,
    )


def check(mml: int, block: int, k: int) -> None:
    decode, prompts = reference(mml, block, k)
    found = drafter_crash(config(mml, block, k), "eagle3")
    if not decode and not prompts:
        assert found is None
        return
    assert found is not None
    positions = {c + a for c, _, a in decode}
    assert found.positions == ((min(positions), max(positions)) if positions else None)
    assert found.decode_cases == len(decode)
    assert found.prompts == ((min(prompts), max(prompts)) if prompts else None)
    assert prompts == set(range(found.prompts[0], found.prompts[1] + 1)) if prompts else True
    # The changes it proposes leave nothing crashing.
    if found.safe_max_model_len is None:
        assert k - 1 >= block  # no length leaves k - 1 tokens of room
    else:
        assert reference(found.safe_max_model_len, block, k) == (set(), set())
    assert found.safe_k < k
    assert reference(mml, block, found.safe_k) == (set(), set()) if found.safe_k >= 1 else True


@pytest.mark.parametrize(
    ("mml", "block", "k"),
    [(512, 128, 3), (4096, 128, 3), (4096, 128, 4), (4095, 128, 4), (4094, 128, 3), (130, 64, 5)],
)
def test_crashing_states_match_the_engine_enumeration(mml: int, block: int, k: int) -> None:
    check(mml, block, k)


@given(st.integers(8, 300), st.sampled_from([2, 4, 8, 16, 32]), st.integers(1, 6))
def test_crashing_states_match_on_random_engines(mml: int, block: int, k: int) -> None:
    check(mml, block, k)


def test_the_issue_example_names_the_states_and_the_fix() -> None:
    found = drafter_crash(config(4096, 128, 3), "eagle3")
    assert found is not None
    assert (found.positions, found.decode_cases, found.prompts) == ((4094, 4094), 4, (4095, 4095))
    assert (found.safe_max_model_len, found.safe_k) == (4094, 2)
    text = found.describe()
    assert "last accepted token is at position 4094" in text
    assert "a prefill ending at 4095 tokens" in text
    assert "assert len(seq_block_table) == n" in text
    assert "maxModelLen 4094 or less" in text
    assert "numSpeculativeTokens 2 or less" in text


def test_no_crash_without_a_draft_model_or_with_room_in_the_table() -> None:
    assert drafter_crash(config(4096, 128, 3), "ngram") is None
    assert drafter_crash(config(4096, 128, 2), "eagle") is None  # k = 2 at a block boundary
    assert drafter_crash(config(4094, 128, 3), "mtp") is None
