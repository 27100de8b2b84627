"""The compile hook loaded the way vLLM loads it, against TEST DOUBLE engine modules.

Each case runs a fresh interpreter with a fake ``vllm_gaudi`` (a model runner and an eagle
proposer shaped like vllm-gaudi's: ``sample_tokens``, ``warmup_model``, ``propose`` calling
``self.model(input_ids=..., attn_metadata=...)``) and a fake ``habana_frameworks.torch.hpu``
whose ``metric_localcontext("graph_compilation")`` counts "compiles" of shapes not seen before.
The plugin is found the way vLLM finds it: ``importlib.metadata.entry_points`` over the
dist-info folder the runner writes. Nothing here is the real engine or Habana's software.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support.hooked_engine import EAGLE_HEAD, HPU, METRICS, fake_gaudi, run_hooked, write_tree

from warmgate.warmup.hook import install as hookenv
from warmgate.warmup.hook import plugin as enginehook
from warmgate.warmup.hook.lines import HookEvent

RUNNER = '''
"""TEST DOUBLE of vllm_gaudi.v1.worker.hpu_model_runner."""
from habana_frameworks.torch.hpu import run
class HPUModelRunner:
    def __init__(self):
        from vllm_gaudi.v1.spec_decode.hpu_eagle import HpuEagleProposer
        self.drafter = HpuEagleProposer()
    def warmup_model(self):
        for bs in (1, 2, 4):
            self.sample_tokens(("decode", bs, 1, 8), [("prompt", 1, 128, 0)])
        return "warmed"
    def sample_tokens(self, target, drafts):
        run(("target", target))
        self.drafter.propose(drafts)
        return "sampled"
'''
# TEST DOUBLE of vllm_gaudi.v1.spec_decode.hpu_eagle.
EAGLE = (
    EAGLE_HEAD
    + """
class Tensor:
    def __init__(self, *shape):
        self.shape = shape
class Model:
    def __call__(self, *, input_ids, attn_metadata, positions=None):
        phase = "prompt" if attn_metadata.is_prompt else "decode"
        run(("drafter", phase, *input_ids.shape, attn_metadata.num_blocks()))
        return "hidden"
    def compute_logits(self, hidden):
        return "logits"
class HpuEagleProposer:
    def __init__(self):
        self.model = Model()
    def propose(self, drafts):
        for phase, bs, query, blocks in drafts:
            self.model(input_ids=Tensor(bs, query), attn_metadata=Attn(phase == "prompt", blocks))
        return self.model.compute_logits("hidden")
"""
)
# After loading the plugins as vLLM does: warm up, then steps with new and known shapes.
SCRIPT = """
import json, os
from importlib.metadata import entry_points
{before}
allowed = os.environ.get("VLLM_PLUGINS")  # vllm/plugins/__init__.py load_plugins_by_group
for plugin in entry_points(group="vllm.general_plugins"):
    if allowed is None or plugin.name in allowed.split(","):
        plugin.load()()
        plugin.load()()  # vLLM may load plugins more than once in a process
import vllm_gaudi.v1.worker.hpu_model_runner as m
runner = m.HPUModelRunner()
step = getattr(runner, "sample_tokens", None) or runner.sample_tokens_v2
assert runner.warmup_model() == "warmed"
assert step(("decode", 1, 1, 8), [("decode", 4, 1, 8)]) == "sampled"
assert step(("decode", 1, 1, 8), [("decode", 4, 1, 8)]) == "sampled"
assert step(("decode", 8, 1, 64), [("decode", 8, 1, 64), ("decode", 2, 1, 16)]) == "sampled"
print(json.dumps(type(runner.drafter.model).__name__))
"""


def engine_tree(
    root: Path, *, runner: str = RUNNER, metrics: str = METRICS, hpu: str = HPU
) -> Path:
    files = fake_gaudi(runner, EAGLE, hpu=hpu, metrics=metrics)
    return write_tree(root, files)


def run_engine(
    tmp: Path,
    *,
    before: str = "",
    env_extra: dict[str, str] | None = None,
    env_after: dict[str, str] | None = None,
    **tree: str,
) -> tuple[list[HookEvent], subprocess.CompletedProcess[str]]:
    """The engine tree (``tree`` replaces its modules) run by SCRIPT; ``env_extra`` is set
    before the hook is added to the environment, ``env_after`` after."""
    engine = engine_tree(tmp / "engine", **tree)
    env = {"PYTHONPATH": str(engine), **(env_extra or {})}
    return run_hooked(tmp, SCRIPT.format(before=before), env=env, env_after=env_after)


def kinds(events: list[HookEvent]) -> list[str]:
    return [e.kind for e in events]


def test_hook_patches_the_engine_when_its_modules_load(tmp_path: Path) -> None:
    events, done = run_engine(tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "Model"  # the drafter's model is restored after propose
    attached = [e.fields["targets"] for e in events if e.kind == "attached"]
    assert attached == [["sample_tokens", "warmup_model"], ["drafter"]]
    (warm,) = [e for e in events if e.kind == "warmup"]
    assert (warm.count, warm.drafter) == (4, 1)  # 3 target graphs + 1 drafter graph
    compiles = [e for e in events if e.kind == "compile"]
    assert [(e.where, e.graph, e.count) for e in compiles if e.where == "drafter"] == [
        ("drafter", ("decode", 4, 1, 8), 1),
        ("drafter", ("decode", 8, 1, 64), 1),
        ("drafter", ("decode", 2, 1, 16), 1),
    ]
    steps = [(e.count, e.drafter) for e in compiles if e.where == "step"]
    # (1, 1, 8) was warmed: step 1 compiled the drafter graph only; step 2 nothing, no line.
    assert steps == [(1, 1), (3, 2)]


def test_hook_attaches_to_modules_imported_before_it(tmp_path: Path) -> None:
    before = "import vllm_gaudi.v1.worker.hpu_model_runner, vllm_gaudi.v1.spec_decode.hpu_eagle"
    events, done = run_engine(tmp_path, before=before)
    assert done.returncode == 0, done.stderr
    assert kinds(events).count("attached") == 2
    assert sum(e.kind == "compile" and e.where == "drafter" for e in events) == 3


def test_a_moved_target_is_left_alone_and_reported(tmp_path: Path) -> None:
    moved = RUNNER.replace("sample_tokens(", "sample_tokens_v2(")
    events, done = run_engine(tmp_path, runner=moved)
    assert done.returncode == 0, done.stderr
    failed = [e for e in events if e.kind == "not-attached"]
    assert failed[0].fields["target"] == "step"
    assert "HPUModelRunner.sample_tokens missing" in failed[0].fields["reason"]
    assert "warmup" not in kinds(events)  # nothing of the runner was patched


def test_missing_habana_metrics_attach_nothing(tmp_path: Path) -> None:
    events, done = run_engine(tmp_path, metrics='"""TEST DOUBLE without the metric API."""\n')
    assert done.returncode == 0, done.stderr
    assert kinds(events) == ["loaded", "not-attached", "not-attached"]
    failed = [e for e in events if e.kind == "not-attached"]
    assert all("metric_localcontext missing" in e.fields["reason"] for e in failed)


def test_an_engine_without_vllm_gaudi_says_there_is_nothing_to_attach_to(tmp_path: Path) -> None:
    # A CPU build of vLLM: the plugin loads (that works), and finds no vllm_gaudi to patch.
    env = {"PYTHONPATH": str(tmp_path / "empty")}
    load = "from importlib.metadata import entry_points as e\n"
    load += "[p.load()() for p in e(group='vllm.general_plugins')]"
    events, done = run_hooked(tmp_path, load, env=env)
    assert done.returncode == 0, done.stderr
    assert [(e.kind, e.fields) for e in events] == [
        ("loaded", {"gaudi": False}),
        ("not-attached", {"target": "step", "reason": enginehook.NO_GAUDI}),
    ]


def test_a_metric_failing_at_runtime_does_not_stop_the_engine(tmp_path: Path) -> None:
    broken = METRICS.replace('assert name == "graph_compilation"', "raise RuntimeError('no')")
    events, done = run_engine(tmp_path, metrics=broken)
    assert done.returncode == 0, done.stderr
    failed = [e for e in events if e.kind == "not-attached"]
    assert len(failed) == 1
    assert "graph_compilation metric failed: RuntimeError: no" in failed[0].fields["reason"]
    assert "compile" not in kinds(events)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        # stats() itself raises: before issue 25 the hook read that as 0 compiles
        (
            "    def stats(self):\n        return",
            "    def stats(self):\n        raise OSError('gone')\n        return",
        ),
        # a changed format: no TotalNumber any more
        ('[["TotalNumber", self.end - self.start],', '[["CompileCount", self.end - self.start],'),
        # a count that is not a count
        ('[["TotalNumber", self.end - self.start],', '[["TotalNumber", "many"],'),
    ],
    ids=["stats-raises", "no-TotalNumber", "not-a-count"],
)
def test_an_unreadable_compile_count_breaks_the_hook(tmp_path: Path, change: str, why: str) -> None:
    events, done = run_engine(tmp_path, metrics=METRICS.replace(change, why))
    assert done.returncode == 0, done.stderr  # the engine runs on
    failed = [e for e in events if e.kind == "not-attached"]
    assert len(failed) == 1, events  # once: counting stops there
    assert failed[0].fields["target"] == "step"
    assert "graph_compilation metric failed" in failed[0].fields["reason"]
    assert "compile" not in kinds(events)  # no count is ever reported as "none"
    assert "warmup" not in kinds(events)  # nor a warmup total


def test_a_failing_synchronize_breaks_the_hook_not_the_engine(tmp_path: Path) -> None:
    hpu = HPU.replace(
        "def synchronize():\n    pass", "def synchronize():\n    raise RuntimeError('device lost')"
    )
    events, done = run_engine(tmp_path, hpu=hpu)
    assert done.returncode == 0, done.stderr
    failed = [e for e in events if e.kind == "not-attached"]
    assert len(failed) == 1
    assert "device lost" in failed[0].fields["reason"]


def test_each_drafter_graph_that_runs_is_named_once(tmp_path: Path) -> None:
    events, done = run_engine(tmp_path)
    assert done.returncode == 0, done.stderr
    ran = [(e.graph, e.fields["warmup"]) for e in events if e.kind == "ran"]
    assert ran == [
        (("prompt", 1, 128, 0), True),  # during the engine's warmup
        (("decode", 4, 1, 8), False),
        (("decode", 8, 1, 64), False),
        (("decode", 2, 1, 16), False),
    ]


def test_vllm_plugins_allow_list_gets_the_hook(tmp_path: Path) -> None:
    env = {"VLLM_PLUGINS": "01.hpu_custom_utils,02.hpu_custom_ops", "PYTHONPATH": "/img"}
    root = hookenv.install(tmp_path)
    hookenv.hook_env(env, root)
    assert env["VLLM_PLUGINS"] == "01.hpu_custom_utils,02.hpu_custom_ops,warmgate_hook"
    assert env["PYTHONPATH"].split(":") == [str(root), str(hookenv.PACKAGE_ROOT), "/img"]
    entry = (root / hookenv.DIST_INFO / "entry_points.txt").read_text()
    assert entry == "[vllm.general_plugins]\nwarmgate_hook = warmgate.warmup.hook.plugin:register\n"
    unset: dict[str, str] = {}
    hookenv.hook_env(unset, root)
    assert "VLLM_PLUGINS" not in unset  # vLLM loads every plugin when it is unset


@pytest.mark.parametrize("allowed", ["", "other"])
def test_an_allow_list_gets_the_hook_added(tmp_path: Path, allowed: str) -> None:
    events, done = run_engine(tmp_path, env_extra={"VLLM_PLUGINS": allowed})
    assert done.returncode == 0, done.stderr
    assert "attached" in kinds(events)


def test_an_allow_list_without_the_hook_loads_nothing(tmp_path: Path) -> None:
    # The control of the test above: vLLM skips plugins the list does not name.
    _, done = run_engine(tmp_path, env_after={"VLLM_PLUGINS": "other"})
    assert done.returncode == 0, done.stderr
    assert "warmgate-hook" not in done.stderr
