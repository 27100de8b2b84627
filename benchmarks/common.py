"""What the planner benchmarks share: an engine config from a table row, and a best-of timer."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from warmgate.buckets import EngineShapeConfig


def config(values: tuple[int, int, int, int | None], k: int, **extra: Any) -> EngineShapeConfig:
    """(max_num_seqs, max_model_len, max_num_batched_tokens, num_gpu_blocks) with k drafts."""
    mns, mml, mbt, blocks = values
    return EngineShapeConfig(
        max_num_seqs=mns,
        max_model_len=mml,
        max_num_batched_tokens=mbt,
        num_gpu_blocks=blocks,
        num_speculative_tokens=k,
        **extra,
    )


def best_of(func: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs of ``func``, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)
