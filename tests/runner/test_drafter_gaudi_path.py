"""The direct warmup's Gaudi path against test doubles of torch, HPUModelRunner and
HpuEagleProposer shaped like vllm-gaudi's source (the signatures of the surface record): what
it passes to ``prepare_attn_metadata``, ``propose`` and ``_prepare_dummy_scenario`` for each
planned shape, and that a shape counts only when the drafter ran that very graph. The real
thing has never run on Gaudi (docs/runner.md, "Direct drafter warmup")."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from warmgate.contract.drafterwarm import make_spec
from warmgate.warmup.hook import drafter_warm


class Tensor:
    """Just enough of a tensor: a shape, values for 1-D ones, slice assignment."""

    def __init__(self, shape: tuple[int, ...], values: list[int] | None = None) -> None:
        self.shape, self.values = shape, values if values is not None else [0] * shape[0]

    def __setitem__(self, key: slice, other: Tensor) -> None:
        self.values[key] = other.values


def fake_torch() -> ModuleType:
    torch = ModuleType("torch")
    torch.int32, torch.int64 = "int32", "int64"  # type: ignore[attr-defined]

    def zeros(shape: Any, dtype: Any = None, device: Any = None) -> Tensor:
        return Tensor(tuple(shape) if isinstance(shape, tuple) else (shape,))

    def full(shape: tuple[int, ...], value: int, dtype: Any = None) -> Tensor:
        return Tensor(shape, [value] * shape[0])

    def tensor(values: list[int], dtype: Any = None) -> Tensor:
        return Tensor((len(values),), list(values))

    torch.zeros, torch.full, torch.tensor = zeros, full, tensor  # type: ignore[attr-defined]
    torch.inference_mode = contextlib.nullcontext  # type: ignore[attr-defined]
    return torch


class Proposer:
    """HpuEagleProposer's two methods (signatures as recorded), logging what they get and
    "running" the graph the engine would: (B, 1, len(block_list)) for the first forward."""

    def __init__(self, log: list[tuple[Any, ...]], ran: list[tuple[Any, ...]]) -> None:
        self.log, self.ran = log, ran
        self.model, self.method, self.max_model_len, self.num_speculative_tokens = (
            None,
            "eagle",
            4096,
            3,
        )

    def prepare_attn_metadata(
        self, block_table_cpu_tensor: Tensor, positions: Tensor, model_runner: Any
    ) -> Any:
        blocks = [-(-(p + 1) // 128) for p in positions.values[: block_table_cpu_tensor.shape[0]]]
        self.log.append(("attn", block_table_cpu_tensor.shape, tuple(blocks)))
        return ("decode", positions.shape[0], sum(blocks))

    def propose(  # noqa: PLR0917 - vllm-gaudi's signature, passed positionally
        self,
        target_token_ids: Tensor,
        target_positions: Tensor,
        target_hidden_states: Tensor,
        last_token_indices: Tensor,
        common_attn_metadata: Any,
        block_table_cpu_tensor: Tensor,
        model_runner: Any,
    ) -> None:
        phase, batch, blocks = common_attn_metadata
        self.log.append(("propose", target_token_ids.shape, target_hidden_states.shape))
        self.ran.append((phase, batch, 1, blocks))


class Runner:
    def __init__(self, log: list[tuple[Any, ...]], ran: list[tuple[Any, ...]]) -> None:
        self.drafter = Proposer(log, ran)
        self.block_size, self.hidden_size, self.dtype, self.device = 128, 64, "bf16", "hpu"
        self.use_contiguous_pa, self.kv_cache_config = False, None
        self.log, self.ran = log, ran

    def warmup_model(self) -> None: ...

    def sample_tokens(self, grammar_output: Any) -> None: ...

    def _prepare_dummy_scenario(self, prompt_cfg: Any, decode_cfg: Any) -> None:
        bs, query, ctx = prompt_cfg
        self.log.append(("dummy", prompt_cfg))
        self.ran.append(("prompt", bs, query - 3, bs * ctx))  # the dummy takes k off

    def get_habana_paged_attn_buffers(
        self, block_tables: Any, slot_mapping: Any, batch_size: Any, block_size: Any = None
    ) -> None: ...


@pytest.fixture
def torch() -> Iterator[None]:
    saved = sys.modules.get("torch")
    sys.modules["torch"] = fake_torch()
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("torch")
        else:
            sys.modules["torch"] = saved


def test_each_shape_gets_the_engines_own_inputs_and_counts_only_when_its_graph_ran(
    torch: None,
) -> None:
    log: list[tuple[Any, ...]] = []
    ran: list[tuple[Any, ...]] = []
    runner = Runner(log, ran)
    shapes = [("decode", 16, 1, 48), ("decode", 4, 1, 2), ("prompt", 1, 512, 2)]
    spec = make_spec("eagle", 3, 128, 4096, shapes)

    def take() -> list[tuple[Any, ...]]:
        out = list(ran)
        ran.clear()
        return out

    warm = drafter_warm.gaudi_warmer(runner, spec, take)
    assert warm is not None
    assert warm(("decode", 16, 1, 48)) == (True, "", {"ran": [["decode", 16, 1, 48]]})
    # 16 sequences hold the 48 blocks (3 each), 16 rows, then propose at the batch's shape
    assert log[0] == ("attn", (16, 32), (3,) * 16)
    assert log[1] == ("propose", (16, 1), (16, 1, 64))
    ok, _, _ = warm(("decode", 4, 1, 2))  # fewer blocks than rows: 2 sequences, 4 rows
    assert ok
    assert log[2] == ("attn", (2, 32), (1, 1))
    # a prompt shape: the engine's dummy prefill, k tokens more (it takes them off again)
    assert warm(("prompt", 1, 512, 2))[0]
    assert log[-1] == ("dummy", (1, 515, 2))
    # the drafter ran another graph than planned: failed, and says which; every form of the
    # dummy prefill was tried (prompt_forms: 515 tokens, then the bucket's own 512)
    runner._prepare_dummy_scenario = lambda p, d: ran.append(("prompt", 1, 256, 2))  # type: ignore[method-assign]
    ok, why, _ = warm(("prompt", 1, 512, 2))
    assert not ok
    both = "[['prompt', 1, 256, 2], ['prompt', 1, 256, 2]]"
    assert why == f"the drafter ran {both}, not the planned graph"


def test_an_engine_that_moved_ends_the_warmup_with_the_difference(torch: None) -> None:
    runner = Runner([], [])
    runner.drafter.prepare_attn_metadata = None  # type: ignore[assignment]
    assert drafter_warm.gaudi_warmer(runner, make_spec("eagle", 3, 128, 4096, []), list) is None
    del Runner._prepare_dummy_scenario
    try:
        with pytest.raises(LookupError, match=r"runner\._prepare_dummy_scenario: missing"):
            drafter_warm.gaudi_warmer(Runner([], []), make_spec("eagle", 3, 128, 4096, []), list)
    finally:
        Runner._prepare_dummy_scenario = _dummy  # type: ignore[attr-defined]


_dummy = Runner._prepare_dummy_scenario
