"""Test helpers: build plans as the operator will, and run the runner from a stdlib-only tree."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.engines import CONFIG_A

from warmgate.buckets import BucketPlan, EngineShapeConfig, plan_buckets
from warmgate.buckets.drafter.graphs import prove_drafter
from warmgate.buckets.drafter.sweep import plan_sweep
from warmgate.contract.drafterwarm import make_spec
from warmgate.contract.order import PLAN_FORMAT_VERSION, bucket_digest
from warmgate.reconcile.planning.drafter_plan import direct_shapes
from warmgate.resources.probe_workload import sweep_replay_steps
from warmgate.resources.warmup_children import copy_runner_script

REPO = Path(__file__).resolve().parents[2]
STANDIN = Path(__file__).with_name("standin_vllm.py")

DEFAULT_STEPS = [
    {"name": "decode-bs8-ctx1000", "concurrency": 8, "prompt_tokens": 1000, "max_tokens": 4},
    {"name": "partial-drafts", "concurrency": 8, "prompt_tokens": 3000, "max_tokens": 4},
    {
        "name": "ngram-matches",
        "concurrency": 4,
        "prompt_tokens": 200,
        "max_tokens": 4,
        "token_pattern": "repeat",
    },
]


def free_port() -> int:
    """A port that was free a moment ago on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def expected_lists(k: int, kv_blocks: int = 8192) -> tuple[str, dict[str, Any]]:
    """The seed file and the expected list digests, computed with warmgate.buckets."""
    config = EngineShapeConfig(**CONFIG_A, num_gpu_blocks=kv_blocks, num_speculative_tokens=k)
    plan = plan_buckets(config)
    return plan.to_bucket_file(), _digests(plan)


def _digests(plan: BucketPlan) -> dict[str, Any]:
    """The plan's three bucket lists as the runner's plan states them: count and digest each."""
    lists = {
        "prompt": plan.prompt_buckets,
        "seed_decode": plan.seed_decode_buckets,
        "decode": plan.decode_buckets,
    }
    return {n: {"count": len(v), "digest": bucket_digest(v)} for n, v in lists.items()}


def make_plan(tmp: Path, *, k: int = 1, **top: Any) -> dict[str, Any]:
    """A complete plan for the stand-in engine under ``tmp``; keyword args replace top fields."""
    seed_text, expected = expected_lists(k)
    spec = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": 4}
    args = ["--max-num-seqs", "64", "--max-num-batched-tokens", "2048", "--block-size", "128"]
    plan: dict[str, Any] = {
        "format_version": PLAN_FORMAT_VERSION,
        "plan_id": "standin-config-a",
        "engine": {
            "command": [sys.executable, str(STANDIN), "serve"],
            "model": "standin/model",
            "port": free_port(),
            "max_model_len": CONFIG_A["max_model_len"],
            "speculative_config": spec if k else None,
            "num_gpu_blocks_override": 8192,
            "args": args,
            "env": {"STANDIN_RECORD": str(tmp / "standin-record.json")},
        },
        "buckets": {"seed_file_text": seed_text, "expected": expected},
        "kv_blocks_expected": 8192,
        "cache": {
            "volume_dir": str(tmp / "volume"),
            "key": "config-a",
            "local_dir": str(tmp / "local" / "recipes"),
        },
        "probe": {
            "steps": copy.deepcopy(DEFAULT_STEPS),
            "max_requests": 64,
            "request_timeout_s": 30,
        },
        "timeouts": {"total_s": 120, "startup_s": 60, "probe_s": 60, "stop_grace_s": 10},
        "report": {"termination_log": str(tmp / "termination-log")},
        "work_dir": str(tmp / "work"),
        "require_device": False,
    }
    plan.update(top)
    return plan


# The example (docs/coverage.md, "Drafter graphs"): max_num_seqs 8, max_model_len 4096.
DRAFTER_CONFIG = {"max_num_seqs": 8, "max_model_len": 4096, "max_num_batched_tokens": 2048}


def make_drafter_plan(
    tmp: Path,
    *,
    method: str = "eagle3",
    k: int = 3,
    hook: bool = True,
    verification: str = "Required",
    direct: bool = False,
    **top: Any,
) -> dict[str, Any]:
    """A plan for a draft-model method as the operator builds it: the drafter sweep of the
    plan, the compile hook (required by spec.warmup.drafter.verification Required, the
    default; BestEffort accepts missing graphs instead), and a probe that replays the sweep's
    steps after its own. ``direct``: with the plan's ``drafter_warmup`` too (every shape
    ``prove_drafter`` lists, as ``DrafterPlan.warmup_spec`` writes it), so the engine plugin
    warms them all directly before /health (issue 33)."""
    config = EngineShapeConfig(**DRAFTER_CONFIG, num_gpu_blocks=8192, num_speculative_tokens=k)
    plan = plan_buckets(config)
    expected = _digests(plan)
    doc = make_plan(tmp, k=k)
    doc["engine"]["max_model_len"] = DRAFTER_CONFIG["max_model_len"]
    doc["engine"]["speculative_config"] = {"method": method, "num_speculative_tokens": k}
    doc["engine"]["args"] = ["--max-num-seqs", "8", "--max-num-batched-tokens", "2048"]
    doc["buckets"] = {"seed_file_text": plan.to_bucket_file(), "expected": expected}
    report = prove_drafter(plan, method)  # type: ignore[arg-type]
    planned = plan_sweep(plan, report, budget_s=1800).spec
    sweep = planned.to_json()
    if direct:
        shapes, _ = direct_shapes(report)
        spec = make_spec(method, k, config.block_size, config.max_model_len, shapes)
        doc["drafter_warmup"] = spec.to_json()
    if sweep["steps"]:
        doc["drafter_sweep"] = sweep
    doc["drafter_hook"] = {"enabled": hook, "required": hook and verification == "Required"}
    if verification == "BestEffort":
        doc["drafter_hook"]["accept_missing"] = True
    replays = [s.to_json() for s in sweep_replay_steps(planned)]
    steps = [*DEFAULT_STEPS[:2], *replays]
    doc["probe"]["steps"] = steps
    doc["probe"]["max_requests"] = max(512, sum(s["concurrency"] for s in steps))
    doc["timeouts"] = {
        "total_s": 300,
        "startup_s": 60,
        "probe_s": 200,
        "sweep_s": 200,
        "stop_grace_s": 10,
    }
    doc.update(top)
    return doc


def stdlib_tree(dest: Path) -> Path:
    """What the init container delivers (warmgate/__init__.py, the runner and the contract),
    copied by the init container's own script."""
    script = copy_runner_script(str(dest))
    subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, timeout=60)
    return dest


@dataclass
class RunResult:
    """What one runner process did."""

    code: int
    stdout: str
    stderr: str
    summary: dict[str, Any]
    tmp: Path

    def report(self, key: str = "config-a") -> dict[str, Any]:
        """The full JSON report the runner wrote to the volume."""
        loaded: dict[str, Any] = json.loads(
            (self.tmp / "volume" / "reports" / f"{key}.json").read_text()
        )
        return loaded

    def standin_record(self) -> dict[str, Any]:
        """The argv and env the stand-in engine received."""
        loaded: dict[str, Any] = json.loads((self.tmp / "standin-record.json").read_text())
        return loaded


def _runner_command(
    tmp: Path,
    plan: dict[str, Any],
    faults: str,
    python: str | None,
    image_env: dict[str, str] | None = None,
) -> tuple[list[str], Path, dict[str, str]]:
    tree = stdlib_tree(tmp / "runner-tree")
    plan_path = tmp / "plan.json"
    plan_path.write_text(json.dumps(plan))
    skip = ("PYTHON", "STANDIN_", "VLLM_", "NO_COLOR")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env.update(image_env or {})  # what the vLLM image's own ENV would set
    env["STANDIN_FAULTS"] = faults
    argv = [python or sys.executable, "-S", "-E", "-m", "warmgate.warmup", "--plan", str(plan_path)]
    return argv, tree, env


def start_runner(
    tmp: Path, plan: dict[str, Any], faults: str = "", args: tuple[str, ...] = ()
) -> subprocess.Popen[bytes]:
    """Start the runner in the background (for signal tests), with extra ``args``."""
    argv, tree, env = _runner_command(tmp, plan, faults, None)
    return subprocess.Popen(
        [*argv, *args], cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


def wait_for(condition: Callable[[], bool], proc: subprocess.Popen[bytes]) -> None:
    """Poll until ``condition`` holds; fail if the runner exits first (bounded by 120 s)."""
    deadline = time.monotonic() + 120
    while not condition():
        assert proc.poll() is None, f"runner exited early with {proc.returncode}"
        assert time.monotonic() < deadline, "condition never held"
        time.sleep(0.05)


def run_runner(
    tmp: Path,
    plan: dict[str, Any],
    faults: str = "",
    python: str | None = None,
    image_env: dict[str, str] | None = None,
) -> RunResult:
    """Run `python -S -m warmgate.warmup --plan` from a stdlib-only copy: -S drops
    site-packages, -E drops PYTHONPATH, so any non-stdlib import would fail the run."""
    argv, tree, env = _runner_command(tmp, plan, faults, python, image_env)
    done = subprocess.run(
        argv, cwd=tree, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    log = Path(plan["report"]["termination_log"])
    summary = json.loads(log.read_text()) if log.exists() else {}
    return RunResult(done.returncode, done.stdout, done.stderr, summary, tmp)
