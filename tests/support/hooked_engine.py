"""TEST DOUBLE engine trees run with the compile hook installed, in a fresh interpreter that
loads its plugins the way vLLM does (the runner's dist-info folder on PYTHONPATH). The trees
are the tests' own fake modules (a fake ``vllm_gaudi``, ``habana_frameworks``, ``torch``);
nothing here is the real engine or Habana's software."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path

from warmgate.warmup.hook import install as hookenv
from warmgate.warmup.hook.lines import HookEvent, parse_hook_line

# A fake habana_frameworks.torch.hpu: a shape not run before is one more "compile".
HPU = '''
"""TEST DOUBLE of habana_frameworks.torch.hpu."""
COMPILES = [0]
SEEN = set()
def synchronize():
    pass
def run(key):
    if key not in SEEN:
        SEEN.add(key)
        COMPILES[0] += 1
'''
# Its compile metric, read the way Habana's metric_localcontext is.
METRICS = '''
"""TEST DOUBLE of habana_frameworks.torch.hpu.metrics."""
from habana_frameworks.torch.hpu import COMPILES
class metric_localcontext:
    def __init__(self, name):
        assert name == "graph_compilation"
    def __enter__(self):
        self.start = COMPILES[0]
        return self
    def __exit__(self, *exc):
        self.end = COMPILES[0]
    def stats(self):
        return [["TotalNumber", self.end - self.start], ["TotalTime", 5], ["AvgTime", 1]]
'''

# The head of a fake vllm_gaudi.v1.spec_decode.hpu_eagle: the attention metadata its drafter
# model reads (prompt or decode, blocks), and the fake Habana run that counts graphs.
EAGLE_HEAD = """
from habana_frameworks.torch.hpu import run
class Attn:
    def __init__(self, prompt, blocks):
        self.is_prompt, self.blocks = prompt, blocks
    def num_blocks(self):
        return self.blocks
"""


def fake_gaudi(
    runner: str, eagle: str, *, hpu: str = HPU, metrics: str = METRICS
) -> dict[str, str]:
    """The files of a fake vllm_gaudi (its model runner and eagle proposer modules) over the
    fake Habana modules."""
    return {
        "habana_frameworks/__init__.py": "",
        "habana_frameworks/torch/__init__.py": "",
        "habana_frameworks/torch/hpu/__init__.py": hpu,
        "habana_frameworks/torch/hpu/metrics.py": metrics,
        "vllm_gaudi/__init__.py": "",
        "vllm_gaudi/v1/__init__.py": "",
        "vllm_gaudi/v1/worker/__init__.py": "",
        "vllm_gaudi/v1/worker/hpu_model_runner.py": runner,
        "vllm_gaudi/v1/spec_decode/__init__.py": "",
        "vllm_gaudi/v1/spec_decode/hpu_eagle.py": eagle,
    }


def write_tree(root: Path, files: Mapping[str, str]) -> Path:
    """Write ``files`` (relative path -> source, dedented) under ``root``; returns ``root``."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def run_hooked(
    tmp: Path,
    script: str,
    *,
    env: dict[str, str],
    env_after: Mapping[str, str] | None = None,
) -> tuple[list[HookEvent], subprocess.CompletedProcess[str]]:
    """Run ``script`` with ``env`` (PYTHONPATH names the tree) after the hook is installed into
    ``tmp / "work"`` and added to ``env``; ``env_after`` is set after that (what the hook's
    own changes must not see). Returns the hook's lines and the finished process."""
    hookenv.hook_env(env, hookenv.install(tmp / "work"))
    env.update(env_after or {})
    done = subprocess.run(
        [sys.executable, "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    events = [e for line in done.stderr.splitlines() if (e := parse_hook_line(line))]
    return events, done
