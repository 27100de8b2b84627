"""Record the real engine's non-Gaudi output: tests/doubles/fixtures/real_engine_logs.

    PYTHONPATH=tests:tests/doubles .venv/bin/python -m realengine.record_golden [--out DIR]

Runs the pinned vLLM CPU engine (make vllm-engine) on the tiny model with the runner's logging
settings, twice: ``plain`` (NO_COLOR=1, what the runner sets) and ``colour``
(VLLM_LOGGING_COLOR=1 through a pipe). Each run: start, /health, two completions, the engine's
10-second SpecDecoding metrics line, SIGTERM. Its stdout and stderr are written with the
volatile parts fixed (golden.normalise: process ids, times, ports, folders), plus a README of
what ran. The stand-in's non-Gaudi lines are tested against these files
(tests/runner/test_standin_real_logs.py); the tier checks that the engine still prints them
(tests/realengine/test_golden_logs.py).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from real_logs import FIXTURES, normalise
from realengine import engine

CASES = {"plain": {"NO_COLOR": "1"}, "colour": {"VLLM_LOGGING_COLOR": "1"}}
FLAGS = (
    "--max-model-len", "512", "--max-num-seqs", "4", "--max-num-batched-tokens", "256",
    "--num-gpu-blocks-override", "512", "-O0",
    "--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}',
)  # fmt: skip
# The runner's logging settings (warmgate.warmup.engine.launch.LOGGING_ENV) but colour.
LOGGING = {"VLLM_CONFIGURE_LOGGING": "1", "VLLM_LOGGING_LEVEL": "INFO"}


def record(case: str, models: dict[str, Path], tmp: Path) -> tuple[str, str]:
    """One run of the engine: its stdout and stderr, normalised."""
    port = engine.free_port()
    argv = engine.serve_argv(models["target"], port, *FLAGS)
    env = engine.clean_env({**LOGGING, **CASES[case]})
    out, err = tmp / f"{case}.stdout", tmp / f"{case}.stderr"
    server = engine.Server(argv, port, out, env)
    with out.open("wb") as o, err.open("wb") as e:
        server.proc = subprocess.Popen(argv, env=env, stdout=o, stderr=e, start_new_session=True)
    server.started = time.monotonic()
    try:
        server.wait_healthy()
        body = {"model": "tiny", "prompt": "gate warm shape", "max_tokens": 16, "temperature": 0}
        for _ in range(2):
            engine.post_json(server.url + "/v1/completions", body)
        deadline = time.monotonic() + 60
        while "SpecDecoding metrics" not in out.read_text(errors="replace"):
            if time.monotonic() > deadline:
                raise TimeoutError("no SpecDecoding metrics line in 60 s")
            engine.post_json(server.url + "/v1/completions", body)
            time.sleep(2)
    finally:
        server.stop()
    folders = {
        str(models["target"].parent): "/models",
        str(engine.VENV): "/venv",
        sysconfig.get_paths()["stdlib"]: "/python",
    }
    return (
        normalise(out.read_text(errors="replace"), port, folders),
        normalise(err.read_text(errors="replace"), port, folders),
    )


def main() -> int:
    """Record every case into the fixtures folder (or --out)."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=FIXTURES)
    args = parser.parse_args()
    why = engine.missing()
    if why is not None:
        print(why, file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        models = engine.make_models(tmp / "models")
        for case in CASES:
            stdout, stderr = record(case, models, tmp)
            (args.out / f"{case}.stdout").write_text(stdout)
            (args.out / f"{case}.stderr").write_text(stderr)
            print(f"recorded {case}: {len(stdout.splitlines())} + {len(stderr.splitlines())} lines")
    meta = {
        "vllm": engine.VLLM_VERSION,
        "torch": engine.TORCH_VERSION,
        "flags": list(FLAGS),
        "env": {case: {**LOGGING, **extra} for case, extra in CASES.items()},
        "recorded": time.strftime("%Y-%m-%d"),
    }
    (args.out / "recorded.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
