"""Run `python -m warmgate.warmup --plan` under the engine's Python, as in the vLLM image.

The runner is the standard-library copy the init container delivers (runner_harness's
``stdlib_tree``), started with the engine venv's Python in that folder; the engine it launches
is the real ``vllm serve``. The scheduler recorder (sched_recorder.py) rides along on the
engine's PYTHONPATH when asked for.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import runner_harness
from realengine import engine, sched_recorder


@dataclass
class RunnerRun:
    """One runner process and what it left behind."""

    code: int
    plan: dict[str, Any]
    summary: dict[str, Any]
    tmp: Path
    seconds: float
    sched_log: Path | None

    @property
    def report(self) -> dict[str, Any]:
        """The full JSON report on the volume."""
        path = Path(self.plan["report"]["dir"]) / f"{self.plan['cache']['key']}.json"
        loaded: dict[str, Any] = json.loads(path.read_text())
        return loaded

    @property
    def engine_log(self) -> str:
        """Everything the engine wrote (the runner's copy, work_dir/engine.log)."""
        path = Path(self.plan["work_dir"]) / "engine.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def steps(self) -> list[dict[str, Any]]:
        """The scheduler's steps as the recorder wrote them (errors fail the caller)."""
        assert self.sched_log is not None
        lines = [json.loads(x) for x in self.sched_log.read_text().splitlines() if x]
        errors = [x["error"] for x in lines if "error" in x]
        assert not errors, errors[:3]
        return lines


def run(plan: dict[str, Any], tmp: Path, *, record: bool = False) -> RunnerRun:
    """Run the runner on ``plan`` to its end; with ``record`` the scheduler recorder too."""
    tree = runner_harness.stdlib_tree(tmp / "runner-tree")
    plan_path = tmp / "plan.json"
    plan_path.write_text(json.dumps(plan))
    extra: dict[str, str] = {}
    sched_log = None
    if record:
        sched_log = tmp / "scheduler.jsonl"
        extra["WARMGATE_SCHED_LOG"] = str(sched_log)
        extra["PYTHONPATH"] = str(engine.install_plugin(tmp / "recorder", sched_recorder))
    argv = [str(engine.PYTHON), "-m", "warmgate.warmup", "--plan", str(plan_path), "--quiet-engine"]
    began = time.monotonic()
    with (tmp / "runner.out").open("w") as out, (tmp / "runner.err").open("w") as err:
        proc = subprocess.Popen(
            argv,
            cwd=tree,
            env=engine.clean_env(extra),
            stdout=out,
            stderr=err,
        )
        try:
            code = proc.wait(timeout=3600)
        finally:
            # Interrupted (a timeout, ^C): SIGTERM makes the runner stop its engine, whose
            # process group is its own, before it ends; a SIGKILL would orphan the engine.
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=120)
    seconds = time.monotonic() - began
    log = Path(plan["report"]["termination_log"])
    summary = json.loads(log.read_text()) if log.exists() else {}
    return RunnerRun(code, plan, summary, tmp, seconds, sched_log)
