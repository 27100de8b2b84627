"""Install the compile hook for the engine: a dist-info entry point on its PYTHONPATH, no pip.

vLLM finds general plugins with ``importlib.metadata.entry_points(group="vllm.general_plugins")``
(vllm/plugins/__init__.py, ``load_plugins_by_group``), which reads every ``*.dist-info`` folder
on ``sys.path``. So the runner writes ``<work_dir>/engine-hook/warmgate_hook-1.dist-info`` and
puts that folder, and the folder holding this ``warmgate`` package, in front of the engine's
PYTHONPATH. When the image sets ``VLLM_PLUGINS`` (an allow-list), the hook's name is added to it.
"""

from __future__ import annotations

import os
from pathlib import Path

PLUGIN_GROUP = "vllm.general_plugins"
PLUGIN_NAME = "warmgate_hook"
ENTRY_POINT = "warmgate.warmup.hook.plugin:register"
DIST_INFO = "warmgate_hook-1.dist-info"
_METADATA = "Metadata-Version: 2.1\nName: warmgate-hook\nVersion: 1\n"
# warmgate/warmup/hook/install.py -> the folder that holds the warmgate package (the init
# container's copy in the Job, a plain checkout in tests).
PACKAGE_ROOT = Path(__file__).resolve().parents[3]


def install(work_dir: Path) -> Path:
    """Write the dist-info folder; returns the folder to put on PYTHONPATH."""
    root = work_dir / "engine-hook"
    info = root / DIST_INFO
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_METADATA, encoding="utf-8")
    entry = f"[{PLUGIN_GROUP}]\n{PLUGIN_NAME} = {ENTRY_POINT}\n"
    (info / "entry_points.txt").write_text(entry, encoding="utf-8")
    return root


def hook_env(env: dict[str, str], root: Path) -> None:
    """Put the hook's folders first on PYTHONPATH and allow it in VLLM_PLUGINS when that is set
    (vLLM loads only the listed plugins then)."""
    paths = [str(root), str(PACKAGE_ROOT)]
    paths += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in paths]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    allowed = env.get("VLLM_PLUGINS")
    if allowed is not None:
        names = [n for n in allowed.split(",") if n]
        env["VLLM_PLUGINS"] = ",".join([*names, PLUGIN_NAME] if PLUGIN_NAME not in names else names)
