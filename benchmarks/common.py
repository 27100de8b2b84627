"""What the benchmarks share: an engine config from a table row, a best-of timer, and the
objects of the scale runs (`manifests`)."""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from warmgate.buckets import EngineShapeConfig

REPO = Path(__file__).resolve().parent.parent
# The scale runs' objects: three examples x maxNumSeqs x k x model size.
BASES = ("llama31-8b-seeds", "minimal-ngram", "llama31-8b-eagle3-gaudi2")
PARAMETERS = ("7B", "8B", "13B", "34B", "70B")


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


def manifests(n: int, namespace: str) -> list[dict[str, Any]]:
    """N objects over ceil(N/3) distinct planner inputs (3 examples x maxNumSeqs x k x size).

    Every config plans in 5-300 ms and is proven, so every object gets a Job.
    """
    bases = [yaml.safe_load((REPO / "examples" / f"{b}.yaml").read_text()) for b in BASES]
    distinct = math.ceil(n / 3)
    docs = []
    for i in range(n):
        config = i % distinct
        doc = copy.deepcopy(bases[config % 3])
        step = config // 3
        doc["metadata"] = {"name": f"sdd-{i:04d}", "namespace": namespace}
        doc["spec"]["engine"]["maxNumSeqs"] = 32 + 4 * (step % 12)
        doc["spec"]["speculative"]["numSpeculativeTokens"] = 1 + (step // 12) % 2
        doc["spec"]["model"]["parameters"] = PARAMETERS[(step // 24) % 5]
        docs.append(doc)
    return docs
