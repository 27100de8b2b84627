"""Benchmark serve mode: what running the engine under the runner costs the engine's output.

Three figures, each the median of --repeats runs (a synthetic engine: a Python child that
writes vLLM-style records, one unwarmed line every 1000):
- throughput: seconds for the engine to write --mb MiB through a pipe to this process (alone)
  vs through serve mode (which forwards every byte and has a copy parsed);
- line latency: how long after the engine wrote a line it reaches the reader of the output,
  alone vs through serve mode (writes every 2 ms, the latency of each measured at the reader);
- parser: lines per second `Watch.feed` consumes in-process (the bound on how fast the engine
  may log before serve mode skips parsing copies, never output).
Run: .venv/bin/python benchmarks/bench_serve_passthrough.py [--mb 64] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import Watch

REPO = Path(__file__).resolve().parents[1]
RECORD = "(EngineCore pid=100) INFO 11-30 10:00:00 [core.py:100] Added request cmpl-{i} " + "x" * 80
UNWARMED = "(EngineCore pid=100) WARNING 11-30 10:00:00 [hpu_model_runner.py:3588] Configuration: ('decode', {i}, 1, 64) was not warmed-up!"  # noqa: E501

WRITER = f"""
import os, sys, time
mode, amount = sys.argv[1], int(sys.argv[2])
if mode == "bulk":
    i, left = 0, amount
    while left > 0:
        line = ({UNWARMED!r} if i % 1000 == 0 else {RECORD!r}).format(i=i) + "\\n"
        os.write(1, line.encode()); left -= len(line); i += 1
else:
    for i in range(amount):
        os.write(1, f"{{time.perf_counter_ns()}} {{{RECORD!r}.format(i=i)}}\\n".encode())
        time.sleep(0.002)
"""


def _serve_argv(engine: list[str], state: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "warmgate.warmup",
        "--serve",
        "--state-file",
        str(state),
        "--",
        *engine,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO)}


def throughput(mb: int, served: bool, state: Path) -> float:
    engine = [sys.executable, "-c", WRITER, "bulk", str(mb * 1024 * 1024)]
    argv = _serve_argv(engine, state) if served else engine
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    while os.read(proc.stdout.fileno(), 1 << 20):  # a reader as `kubectl logs` has: a pipe
        pass
    assert proc.wait() == 0
    return time.perf_counter() - began


def latencies(lines: int, served: bool, state: Path) -> list[float]:
    engine = [sys.executable, "-c", WRITER, "timed", str(lines)]
    argv = _serve_argv(engine, state) if served else engine
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, env=_env())
    assert proc.stdout is not None
    found = []
    for raw in proc.stdout:
        found.append((time.perf_counter_ns() - int(raw.split(b" ", 1)[0])) / 1e6)
    proc.wait()
    return found


def parser_rate(lines: int) -> float:
    watch = Watch(ServeTally(), lambda: None)
    text = "".join((UNWARMED if i % 1000 == 0 else RECORD).format(i=i) + "\n" for i in range(lines))
    chunks = [text[i : i + 65536] for i in range(0, len(text), 65536)]
    began = time.perf_counter()
    for chunk in chunks:
        watch.feed(chunk, "out")
    return lines / (time.perf_counter() - began)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--lines", type=int, default=2000)
    args = parser.parse_args()
    state = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench-serve-{os.getpid()}.json"
    for served in (False, True):
        label = "under serve mode" if served else "alone"
        secs = statistics.median(throughput(args.mb, served, state) for _ in range(args.repeats))
        print(f"throughput {label:>16}: {args.mb} MiB in {secs:.2f} s ({args.mb / secs:.0f} MiB/s)")
        if served:
            skipped = json.loads(state.read_text())["dropped_bytes"] / 2**20
            print(f"  the observer skipped {skipped:.1f} MiB of the copy in the last run")
    for served in (False, True):
        label = "under serve mode" if served else "alone"
        found = latencies(args.lines, served, state)
        q = statistics.quantiles(found, n=100)
        median = statistics.median(found)
        print(f"line latency {label:>16}: median {median:.3f} ms, p99 {q[98]:.3f} ms")
    rate = statistics.median(parser_rate(200_000) for _ in range(args.repeats))
    print(f"parser: {rate:,.0f} lines/s (Watch.feed, 64 KiB chunks, 1 unwarmed line in 1000)")
    state.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
