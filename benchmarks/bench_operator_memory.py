"""Where the operator's memory goes: N objects applied, the operator's RSS and a probe's report.

Run: .venv/bin/python benchmarks/bench_operator_memory.py [--n 300] [--trace] [--out FILE]
A fresh etcd + kube-apiserver (no nodes), `warmgate operator` as its own process with the probe
`benchmarks/memory_probe/sitecustomize.py` on its path, the same N objects as
bench_operator_scale.py in one `kubectl apply`; the RSS is sampled every second until every
object reports its Job, then after a settling pause the probe writes its report (objects by
type; with --trace, tracemalloc's live allocations since the apply, which slows the operator
about 3x). Prints the RSS at start, at the end and its peak; the report goes to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from bench_operator_scale import apply_all, manifests, progress, start_control_plane  # noqa: E402
from scale_harness import (  # noqa: E402
    OPERATOR_USERS,
    AuditedControlPlane,
    Watcher,
    peak_rss_mb,
    rss_mb,
)

from warmgate.devcluster.controlplane import OperatorProcess  # noqa: E402

PROBE = REPO / "benchmarks" / "memory_probe"
END = "-- end"


def report(op: OperatorProcess, out: Path, timeout: float = 600.0) -> None:
    """Ask the probe for a report and wait until it is written."""
    written = out.read_text().count(END) if out.exists() else 0
    os.kill(op.proc.pid, signal.SIGUSR1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists() and out.read_text().count(END) > written:
            return
        time.sleep(1.0)
    raise TimeoutError(f"no report from the probe in {timeout:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--trace", action="store_true", help="tracemalloc (1 frame)")
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--out", type=Path, default=Path("operator-memory.txt"))
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the operator")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    env.update(MEMPROBE_OUT=str(args.out.resolve()), PYTHONPATH=str(PROBE))
    if args.trace:
        env["MEMPROBE_TRACE"] = "1"
    cp = start_control_plane()
    try:
        print(json.dumps(measure(cp, args, env), indent=1))
    finally:
        cp.stop()


def measure(
    cp: AuditedControlPlane, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, object]:
    namespace = f"memory-{args.n}"
    cp.kubectl("create", "namespace", namespace)
    watcher = Watcher(cp.api_client(), namespace)
    log = Path(tempfile.mkdtemp(prefix="warmgate-bench-")) / "operator.log"
    kubeconfig = cp.operator_kubeconfig(OPERATOR_USERS[0])
    op = OperatorProcess(kubeconfig, namespace, log, env=env)
    try:
        op.wait_alive()
        time.sleep(5.0)
        pid, started = op.proc.pid, rss_mb(op.proc.pid)
        report(op, args.out)  # the object census before any object (and tracing from here)
        samples: list[float] = []
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                samples.append(rss_mb(pid))
                time.sleep(1.0)

        threading.Thread(target=sample, daemon=True).start()
        began = apply_all(cp, manifests(args.n, namespace))
        progress(f"applied {args.n} objects; waiting until each reports its Job")
        done = watcher.wait(lambda: len(watcher.reported) >= args.n, 1800.0)
        reported = time.time() - began
        time.sleep(args.settle)
        sampling.set()
        row = {
            "objects": args.n,
            "every object reported its Job after": f"{reported:.0f} s" if done else "timeout",
            "RSS with no object": f"{started:.0f} MB",
            "RSS at the end": f"{rss_mb(pid):.0f} MB",
            "peak RSS (VmHWM)": f"{peak_rss_mb(pid):.0f} MB",
            "RSS samples every 10 s": [round(s) for s in samples[::10]],
        }
        report(op, args.out)
        return row
    finally:
        watcher.stop()
        op.stop()
        print(f"  operator log: {log}; probe report: {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
