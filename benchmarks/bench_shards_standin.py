"""Issue 38: the wall time of a sharded warmup with the stand-in engine, N = 1, 2 and 4.

    .venv/bin/python benchmarks/bench_shards_standin.py [--repeat 3]

Config A (k = 1: 63 prompt, 105 decode buckets), the runner from its standard-library copy in
front of the stand-in engine (tests/doubles/standin_vllm.py), as the runner tier runs it. N = 1
is one runner on the whole plan; N > 1 the operator's slice documents (resources/warmup_shards)
run as N processes side by side, Pod 0 then merging and running the whole plan. The stand-in
compiles nothing (a bucket costs it microseconds), so this measures the mechanism's own cost
(engine starts, the merge's wait, copy and second engine), not a speed-up: that is Gaudi's.
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "doubles"), str(ROOT / "tests")]
import runner_harness  # noqa: E402

from warmgate.buckets import EngineShapeConfig, plan_buckets  # noqa: E402
from warmgate.contract.order import parse_plan  # noqa: E402
from warmgate.resources.warmup_shards import sharded_warmup  # noqa: E402

RUNNER = [sys.executable, "-S", "-E", "-m", "warmgate.warmup"]


def _once(shards: int) -> float:
    with tempfile.TemporaryDirectory(prefix="shard-bench-") as name:
        tmp = Path(name)
        doc = runner_harness.make_plan(tmp, k=1)
        doc["engine"]["env"]["STANDIN_BUCKET_RECIPES"] = "1"
        _, tree, env = runner_harness._runner_command(tmp, doc, "", None)
        if shards == 1:
            began = time.monotonic()
            code = subprocess.run(
                [*RUNNER, "--plan", str(tmp / "plan.json")],
                cwd=tree, env=env, capture_output=True, check=False,
            ).returncode  # fmt: skip
            assert code == 0, code
            return time.monotonic() - began
        config = EngineShapeConfig(
            **runner_harness.CONFIG_A, num_gpu_blocks=8192, num_speculative_tokens=1
        )
        sharded = sharded_warmup(parse_plan(doc), plan_buckets(config), shards)
        files: dict[str, Any] = {"plan.json": sharded.merge.to_json(), **sharded.files()}
        for i in range(shards):
            pod = tmp / f"pod-{i}"
            pod.mkdir()
            for fname, content in files.items():
                text = copy.deepcopy(content)
                text["engine"]["port"] = runner_harness.free_port()
                text["work_dir"] = str(pod / "work")
                text["cache"]["local_dir"] = str(pod / "local")
                text["report"]["termination_log"] = str(pod / "tl")
                (pod / fname).write_text(json.dumps(text))
        began = time.monotonic()
        runner = [*RUNNER, "--shards"]
        procs = [
            subprocess.Popen(
                [*runner, str(tmp / f"pod-{i}"), "--shard-index", str(i)],
                cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            for i in range(shards)
        ]  # fmt: skip
        codes = [p.wait(timeout=600) for p in procs]
        assert codes == [0] * shards, codes
        return time.monotonic() - began


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{'N':>2}  {'median s':>9}  {'runs s'}")
    for shards in (1, 2, 4):
        runs = sorted(_once(shards) for _ in range(args.repeat))
        print(f"{shards:>2}  {runs[len(runs) // 2]:>9.1f}  {', '.join(f'{r:.1f}' for r in runs)}")


if __name__ == "__main__":
    main()
