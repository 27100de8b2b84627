"""How long creating N SpecDecodeDeployments takes this machine with warmgate, and with a peer
that does the least a kopf operator can (`floor_operator.py`: one Job per object, no planning,
no status), side by side: the floor under issue 14's creation target.

Run: KUBEBUILDER_ASSETS=... .venv/bin/python benchmarks/bench_creation_floor.py [--sizes 1000]
Per N and operator: a fresh audited control plane (no nodes), the operator as its own process,
the same N manifests as bench_operator_scale.py in one `kubectl apply`; then the time until
every object has a Job, the requests the operator sent per object, and the CPU seconds of the
operator, the apiserver and etcd while creating, and how long a SIGTERM at that moment takes to
stop the operator (syncs may still be queued). Prints figures only; docs/benchmarks.md
records them.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from bench_operator_scale import apply_all, manifests, start_control_plane  # noqa: E402
from scale_harness import (  # noqa: E402
    OPERATOR_USERS,
    AuditedControlPlane,
    Watcher,
    audited,
    cpu_seconds,
    percentile,
)

from warmgate.devcluster.controlplane import OperatorProcess  # noqa: E402

OPERATORS = ("floor", "warmgate")


def floor_process(kubeconfig: Path, namespace: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable, "-m", "kopf", "run", "--standalone", "--namespace", namespace,
        str(HERE / "floor_operator.py"),
    ]  # fmt: skip
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT)


def control_plane_cpu(cp: AuditedControlPlane) -> tuple[float, float]:
    """CPU seconds so far of the apiserver and of etcd."""
    by_name = {Path(str(p.args[0])).name: p.pid for p in cp._procs}
    return cpu_seconds(by_name["kube-apiserver"]), cpu_seconds(by_name["etcd"])


def run(operator: str, n: int, timeout: float) -> dict[str, str]:
    cp = start_control_plane()
    namespace = f"floor-{n}"
    try:
        cp.kubectl("create", "namespace", namespace)
        watcher = Watcher(cp.api_client(), namespace)
        log = Path(tempfile.mkdtemp(prefix="warmgate-floor-")) / "operator.log"
        kubeconfig = cp.operator_kubeconfig(OPERATOR_USERS[0])
        if operator == "floor":
            proc = floor_process(kubeconfig, namespace, log)
            time.sleep(5)  # kopf is watching well before this
        else:
            proc = OperatorProcess(kubeconfig, namespace, log).wait_alive().proc
        cpu0, (api0, etcd0) = cpu_seconds(proc.pid), control_plane_cpu(cp)
        began = apply_all(cp, manifests(n, namespace))
        applied = time.time() - began
        done = watcher.wait(lambda: len(watcher.job_seen) >= n, timeout)
        to_job = [t - began for t in watcher.job_seen.values()]
        cpu1, (api1, etcd1) = cpu_seconds(proc.pid), control_plane_cpu(cp)
        sent = [r for r in audited(cp) if r.at >= began]
        watcher.stop()
        stopping = time.monotonic()
        proc.terminate()  # in the wake of the burst: syncs may still be queued
        try:
            proc.wait(timeout=60)
            stopped = f"{time.monotonic() - stopping:.1f} s"
        except subprocess.TimeoutExpired:
            proc.kill()
            stopped = "> 60 s (killed)"
        last = f"{max(to_job):.1f} s" if done else f"> {timeout:.0f} s ({len(to_job)} Jobs)"
        p50 = percentile(to_job, 0.5)
        return {
            "time until every object has its Job": last,
            "  (kubectl apply itself; Job p50)": f"{applied:.1f} s; {p50:.1f} s",
            "operator requests per object": f"{len(sent) / n:.1f}",
            "operator CPU": f"{cpu1 - cpu0:.0f} s",
            "apiserver + etcd CPU": f"{api1 - api0:.0f} + {etcd1 - etcd0:.0f} s",
            "SIGTERM to exit, at the last Job": stopped,
        }
    finally:
        cp.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1000")
    parser.add_argument("--timeout", type=float, default=600.0)
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",") if s):
        rows = {op: run(op, n, args.timeout) for op in OPERATORS}
        print(f"\n| N={n:,} | " + " | ".join(OPERATORS) + " | warmgate / floor |")
        print("|---|---|---|---|")
        for label in rows["floor"]:
            floor, ours = rows["floor"][label], rows["warmgate"][label]
            ratio = _ratio(floor, ours)
            print(f"| {label} | {floor} | {ours} | {ratio} |")


def _ratio(floor: str, ours: str) -> str:
    try:
        a, b = float(floor.split(maxsplit=1)[0]), float(ours.split(maxsplit=1)[0])
    except ValueError:
        return ""
    return f"{b / a:.1f}x" if a else ""


if __name__ == "__main__":
    main()
