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
