"""The engine plugin's direct drafter warmup as vLLM loads it, against TEST DOUBLE engine
modules shaped like vllm-gaudi's (the surface record's signatures): a fresh interpreter, the
plugin found through its dist-info entry point, a fake Habana compile metric, a fake torch.
After ``HPUModelRunner.warmup_model`` the plugin warms each planned shape, inside the warmup's
compile count, and logs one line per shape and the closing line; nothing is logged as a
compile outside warmup. Nothing here is the real engine, torch or Habana's software."""

from __future__ import annotations

from pathlib import Path

from support.hooked_engine import EAGLE_HEAD, fake_gaudi, run_hooked, write_tree

from warmgate.contract.drafterwarm import DRAFTER_WARMUP_ENV, make_spec
from warmgate.warmup.hook.lines import HookEvent

TORCH = """
        import contextlib
        int32, int64 = "int32", "int64"
        class Tensor:
            def __init__(self, shape, values=None):
                self.shape = shape
                self.values = values if values is not None else [0] * shape[0]
            def __setitem__(self, key, other):
                self.values[key] = other.values
        def zeros(shape, dtype=None, device=None):
            return Tensor(tuple(shape) if isinstance(shape, tuple) else (shape,))
        def full(shape, value, dtype=None):
            return Tensor(shape, [value] * shape[0])
        def tensor(values, dtype=None):
            return Tensor((len(values),), list(values))
        inference_mode = contextlib.nullcontext
    """
EAGLE = (
    EAGLE_HEAD
    + """
class Model:
    def __call__(self, *, input_ids, positions, hidden_states, inputs_embeds,
                 attn_metadata):
        phase = "prompt" if attn_metadata.is_prompt else "decode"
        run(("drafter", phase, *input_ids.shape, attn_metadata.num_blocks()))
class EagleProposer:
    pass
class HpuEagleProposer(EagleProposer):
    def __init__(self):
        self.model, self.method = Model(), "eagle"
        self.max_model_len, self.num_speculative_tokens = 4096, 2
    def propose(self, target_token_ids, target_positions, target_hidden_states,
                last_token_indices, common_attn_metadata, block_table_cpu_tensor,
                model_runner):
        self.model(input_ids=target_token_ids, positions=target_positions,
                   hidden_states=target_hidden_states, inputs_embeds=None,
                   attn_metadata=common_attn_metadata)
        for _ in range(self.num_speculative_tokens - 1):
            self.model(input_ids=last_token_indices, positions=None, hidden_states=None,
                       inputs_embeds=None, attn_metadata=Attn(False, 1))
    def prepare_attn_metadata(self, block_table_cpu_tensor, positions, model_runner):
        rows = block_table_cpu_tensor.shape[0]
        blocks = sum(-(-(p + 1) // 128) for p in positions.values[:rows])
        return Attn(False, blocks)
"""
)
RUNNER = """
        from habana_frameworks.torch.hpu import run
        class HPUModelRunner:
            def __init__(self):
                from vllm_gaudi.v1.spec_decode.hpu_eagle import HpuEagleProposer
                self.drafter = HpuEagleProposer()
                self.block_size, self.hidden_size, self.dtype, self.device = 128, 64, "bf16", "hpu"
                self.use_contiguous_pa, self.kv_cache_config = False, None
            def warmup_model(self):
                run(("target", "decode", 1, 1, 8))
                return "warmed"
            def sample_tokens(self, grammar_output):
                return "sampled"
            def _prepare_dummy_scenario(self, prompt_cfg, decode_cfg):
                from vllm_gaudi.v1.spec_decode.hpu_eagle import Attn
                from torch import Tensor
                bs, query, ctx = prompt_cfg
                self.drafter.propose(Tensor((bs, query - 2)), None, None, Tensor((1,)),
                                     Attn(True, bs * ctx), None, self)
            def get_habana_paged_attn_buffers(self, block_tables, slot_mapping, batch_size,
                                              block_size=None):
                pass
    """
FILES = {"torch/__init__.py": TORCH, **fake_gaudi(RUNNER, EAGLE)}
SCRIPT = """
from importlib.metadata import entry_points
for plugin in entry_points(group="vllm.general_plugins"):
    plugin.load()()
import vllm_gaudi.v1.worker.hpu_model_runner as m
runner = m.HPUModelRunner()
assert runner.warmup_model() == "warmed"
assert runner.sample_tokens(None) == "sampled"
"""
SHAPES = [("decode", 16, 1, 48), ("decode", 4, 1, 8), ("prompt", 1, 256, 2)]


def run_engine(tmp: Path, shapes: list[tuple[str, int, int, int]]) -> list[HookEvent]:
    root = write_tree(tmp / "engine", FILES)
    doc = make_spec("eagle", 2, 128, 4096, shapes).write(tmp / "plan")
    env = {"PYTHONPATH": str(root), DRAFTER_WARMUP_ENV: str(doc)}
    events, done = run_hooked(tmp, SCRIPT, env=env)
    assert done.returncode == 0, done.stderr
    return events


def test_the_plugin_warms_each_planned_shape_after_the_engines_warmup(tmp_path: Path) -> None:
    events = run_engine(tmp_path, SHAPES)
    per_shape = {tuple(e.fields["graph"]): e for e in events if e.kind == "drafter-warm"}
    assert set(per_shape) == set(SHAPES)
    assert all(e.fields["ok"] for e in per_shape.values()), [e.fields for e in events]
    (closing,) = [e for e in events if e.kind == "drafter-warmup"]
    assert (closing.fields["state"], closing.fields["engine"], closing.fields["warmed"]) == (
        "done",
        "gaudi",
        3,
    )
    # inside the engine's warmup count: 1 target graph + 3 planned + the calls 2..k graph
    (warmup,) = [e for e in events if e.kind == "warmup"]
    assert (warmup.count, warmup.drafter) == (5, 4)
    assert [e for e in events if e.kind == "compile"] == []
    assert kinds_in_order(events) == ["warmup"]  # the closing line comes before the warmup's


def kinds_in_order(events: list[HookEvent]) -> list[str]:
    order = [e.kind for e in events if e.kind in ("drafter-warmup", "warmup")]
    return order[order.index("drafter-warmup") + 1 :]


def test_a_shape_the_drafter_does_not_run_is_failed_with_what_ran(tmp_path: Path) -> None:
    """A prompt shape whose dummy the engine pads elsewhere (here: a context the shape does not
    name) is no evidence: failed, naming the graph that did run."""
    events = run_engine(tmp_path, [("prompt", 1, 256, 3)])
    (line,) = [e for e in events if e.kind == "drafter-warm"]
    assert line.fields["ok"] is True
    events = run_engine(tmp_path / "b", [("prompt", 2, 256, 3)])  # 3 blocks over 2 rows: ctx 1
    (line,) = [e for e in events if e.kind == "drafter-warm"]
    assert line.fields["ok"] is False
    assert "['prompt', 2, 256, 2]" in line.fields["reason"]
