#!/usr/bin/env python3
"""Print, as JSON, the parts of vllm-gaudi's source the engine plugin relies on, at one commit.

    python3 hack/vllm-gaudi-surface.py GIT_DIR COMMIT

reads (``git show COMMIT:path``) vllm_gaudi/v1/worker/hpu_model_runner.py and
vllm_gaudi/v1/spec_decode/hpu_eagle.py and records, with ``ast``: the parameters of the methods
the plugin calls or wraps, every ``self.<attribute>`` each class assigns or reads, and the
base classes. tests/runner/data/vllm_gaudi_surface.json holds its output for the two
pinned commits (issue 33 item 4); the test there checks the plugin's assumptions against it.
Standard library only.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

FILES = {
    "runner": ("vllm_gaudi/v1/worker/hpu_model_runner.py", "HPUModelRunner"),
    "proposer": ("vllm_gaudi/v1/spec_decode/hpu_eagle.py", "HpuEagleProposer"),
}
METHODS = {
    "runner": (
        "warmup_model",
        "sample_tokens",
        "_prepare_dummy_scenario",
        "_execute_dummy_scenario",
        "get_habana_paged_attn_buffers",
        "propose_eagle_decode",
        "propose_eagle_prefill",
    ),
    "proposer": ("propose", "prepare_attn_metadata", "prepare_inputs"),
}


def _params(fn: ast.FunctionDef) -> list[str]:
    args = fn.args
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    names += [f"*{args.vararg.arg}"] if args.vararg else []
    names += [a.arg for a in args.kwonlyargs]
    return names + ([f"**{args.kwarg.arg}"] if args.kwarg else [])


def surface(git_dir: str, commit: str) -> dict[str, object]:
    out: dict[str, object] = {"commit": commit}
    for key, (path, cls_name) in FILES.items():
        text = subprocess.run(
            ["git", "-C", git_dir, "show", f"{commit}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        classes = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.ClassDef)]
        cls = next(n for n in classes if n.name == cls_name)
        methods = {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef)}
        attrs = sorted(
            {
                n.attr
                for n in ast.walk(cls)
                if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name)
                and n.value.id == "self"
            }
        )
        out[key] = {
            "path": path,
            "class": cls_name,
            "bases": [ast.unparse(b) for b in cls.bases],
            "methods": {m: _params(methods[m]) for m in METHODS[key] if m in methods},
            "self_attributes": attrs,
        }
    return out


if __name__ == "__main__":
    print(json.dumps(surface(sys.argv[1], sys.argv[2]), indent=1, sort_keys=True))
