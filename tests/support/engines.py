"""Small engine configurations for the bucket tests: fields by hand, or drawn by Hypothesis."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from warmgate.buckets.engine.config import EngineShapeConfig

# Config A of the shared doc (§6): 63 prompt, 43 seed and, with k=1, 105 decode buckets.
CONFIG_A = {"max_num_seqs": 64, "max_model_len": 4096, "max_num_batched_tokens": 2048}


def engine_fields(mns: int, mml: int, mbt: int, block: int, **extra: Any) -> dict[str, Any]:
    """The four limits every configuration names, plus any other field."""
    return {
        "max_num_seqs": mns,
        "max_model_len": mml,
        "max_num_batched_tokens": mbt,
        "block_size": block,
        **extra,
    }


@st.composite
def ngram_engines(
    draw: st.DrawFn, blocks: tuple[int, ...], seqs: tuple[int, int], context_blocks: int
) -> EngineShapeConfig:
    """An ngram engine small enough to prove in milliseconds: ``seqs`` sequences (bounds),
    2 to ``context_blocks`` blocks of context, 1-4 blocks per step, k of 2 to 4, every strategy
    and profile."""
    block = draw(st.sampled_from(blocks))
    return EngineShapeConfig(
        **engine_fields(
            draw(st.integers(*seqs)),
            draw(st.integers(2, context_blocks)) * block,
            draw(st.integers(1, 4)) * block,
            block,
        ),
        num_gpu_blocks=draw(st.integers(8, 200)),
        num_speculative_tokens=draw(st.integers(2, 4)),
        strategy=draw(st.sampled_from(["exp", "lin", "pad"])),
        profile=draw(st.sampled_from(["v0.26.0", "main-2026-08"])),
        speculative_method="ngram",
    )
