"""Benchmark the operator at scale against the real apiserver (issue 14's table).

Run: .venv/bin/python benchmarks/bench_operator_scale.py [--sizes 100,300,1000]
Per N it starts a fresh etcd + kube-apiserver (no nodes: Jobs stay pending), runs
`warmgate operator` as its own process, applies N SpecDecodeDeployments in one `kubectl apply`
(a third of them distinct configs), and prints: the time until every object has its Job; over an
idle minute the operator's CPU, the objects it re-planned and its apiserver requests (counted
exactly from the apiserver's audit log); the time from a Job's completion to the status (the
benchmark plays the Job controller and kubelet); peak RSS; the time a SIGTERM takes to stop it.
`--operator-src DIR` runs the operator from another checkout (e.g. `git archive main`).
Prints figures only; docs/benchmarks.md records them.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes import client

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "benchmarks"))

from common import manifests  # noqa: E402
from scale_harness import (  # noqa: E402
    OPERATOR_USERS,
    AuditedControlPlane,
    Watcher,
    audited,
    count_by,
    cpu_seconds,
    metric,
    peak_rss_mb,
    percentile,
    rss_mb,
)
from support.kube_objects import (  # noqa: E402
    job_status,
    runner_summary,
    terminated_status,
    warmup_pod,
)

from warmgate.devcluster.controlplane import OperatorProcess, find_assets  # noqa: E402

CRD = REPO / "crds" / "warmgate.dev_specdecodedeployments.yaml"
PLAN_COUNT = "warmgate_plan_duration_seconds_count"
PLAN_SUM = "warmgate_plan_duration_seconds_sum"


def progress(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_control_plane() -> AuditedControlPlane:
    cp = AuditedControlPlane(find_assets()).start()
    cp.kubectl("apply", "--server-side", "-f", str(CRD))
    cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(CRD))
    return cp


def apply_all(cp: AuditedControlPlane, docs: list[dict[str, Any]]) -> float:
    """One `kubectl apply` of every object; returns the time it started."""
    began = time.time()
    cp.kubectl(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs})
    )
    return began


def complete_jobs(
    api: client.ApiClient, watcher: Watcher, namespace: str, names: list[str], gap: float
) -> dict[str, float]:
    """Play the kubelet and the Job controller for these objects' Jobs; when each finished."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    finished = {}
    for name in names:
        warmup = watcher.sdds[name]["status"]["warmup"]
        job = watcher.jobs[warmup["jobName"]]
        # As the Job controller makes it: the template's labels, the controller's labels and
        # owner reference (the operator trusts only Pods the Job controls).
        # the Job's own template too: the operator reads a verdict only from a Pod that runs it.
        pod = warmup_pod(
            namespace,
            job["metadata"]["name"],
            job["metadata"]["uid"],
            template=job["spec"]["template"],
        )
        pod["metadata"]["labels"].update(job["spec"]["template"]["metadata"]["labels"])
        pod_name = pod["metadata"]["name"]
        core.create_namespaced_pod(namespace, pod, _preload_content=False)
        summary = runner_summary("verified", warmup["cacheKey"], kv_blocks=4096)
        status = {"status": terminated_status(summary, ok=True)}
        core.patch_namespaced_pod_status(pod_name, namespace, status, _preload_content=False)
        job_patch = {"status": job_status(ok=True)}
        batch.patch_namespaced_job_status(
            job["metadata"]["name"], namespace, job_patch, _preload_content=False
        )
        finished[name] = time.time()
        time.sleep(gap)
    return finished


def run_size(n: int, args: argparse.Namespace, env: dict[str, str]) -> dict[str, str]:
    cp = start_control_plane()
    try:
        return measure(cp, n, args, env)
    finally:
        cp.stop()


def measure(
    cp: AuditedControlPlane, n: int, args: argparse.Namespace, env: dict[str, str]
) -> dict[str, str]:
    namespace = f"scale-{n}"
    cp.kubectl("create", "namespace", namespace)
    api = cp.api_client()
    watcher = Watcher(api, namespace)
    log = Path(tempfile.mkdtemp(prefix="warmgate-bench-")) / "operator.log"
    op = OperatorProcess(
        cp.operator_kubeconfig(OPERATOR_USERS[0]), namespace, log, env=env
    ).wait_alive()
    pid, row = op.proc.pid, {}
    try:
        progress(f"applying {n} objects")
        cpu_start = cpu_seconds(pid)
        began = apply_all(cp, manifests(n, namespace))
        progress(f"applied in {time.time() - began:.1f} s; waiting for the Jobs")
        applied = time.time() - began
        all_jobs = watcher.wait(lambda: len(watcher.job_seen) >= n, args.timeout)
        to_job = [t - began for t in watcher.job_seen.values()]
        row["time until every object has its Job"] = (
            f"{max(to_job):.1f} s" if all_jobs else f"> {args.timeout:.0f} s ({len(to_job)} Jobs)"
        )
        row["  (kubectl apply itself; Job p50)"] = (
            f"{applied:.1f} s; {percentile(to_job, 0.5):.1f} s"
        )
        watcher.wait(lambda: len(watcher.reported) >= n, args.timeout)
        creating = [r for r in audited(cp) if r.at >= began]
        row["  requests while creating, per object"] = f"{len(creating) / n:.1f}"
        kinds = count_by(creating, lambda r: f"{r.verb} {r.resource}")
        row["  (most frequent while creating, per object)"] = ", ".join(
            f"{k} {v / n:.1f}" for k, v in list(kinds.items())[:14]
        )
        time.sleep(args.settle)
        progress(f"idle window of {args.idle:.0f} s")
        row["  operator CPU while creating"] = f"{cpu_seconds(pid) - cpu_start:.0f} s"
        row.update(idle(cp, op, args.idle))
        progress("completing Jobs")
        row.update(completions(api, watcher, namespace, n, args))
        row["peak RSS"] = f"{peak_rss_mb(pid):.0f} MB (now {rss_mb(pid):.0f} MB)"
        plans = op.get("/metrics")
        row["  plans computed in all (their wall times summed over the sync threads)"] = (
            f"{metric(plans, PLAN_COUNT):.0f} ({metric(plans, PLAN_SUM):.1f} s)"
        )
        row["clean shutdown (SIGTERM to exit)"] = shutdown(op)
    finally:
        watcher.stop()
        if op.proc.poll() is None:
            op.stop()
        print(f"  operator log: {log}", file=sys.stderr)
    return row


def idle(cp: AuditedControlPlane, op: OperatorProcess, seconds: float) -> dict[str, str]:
    """CPU, re-plans and API requests of the operator over a window where nothing changes."""
    pid = op.proc.pid
    cpu0, plans0, t0 = cpu_seconds(pid), metric(op.get("/metrics"), PLAN_COUNT), time.time()
    time.sleep(seconds)
    cpu1, plans1, t1 = cpu_seconds(pid), metric(op.get("/metrics"), PLAN_COUNT), time.time()
    time.sleep(1.0)  # the audit log is written as requests arrive; let the last lines land
    window = [r for r in audited(cp) if t0 <= r.at < t1]
    per_minute = 60.0 / (t1 - t0)
    kinds = count_by(window, lambda r: f"{r.verb} {r.resource}")
    top = ", ".join(f"{k} {v * per_minute:.0f}" for k, v in list(kinds.items())[:4]) or "none"
    return {
        "operator CPU while nothing changes": f"{(cpu1 - cpu0) * per_minute:.1f} s/min",
        "objects re-planned per idle minute": f"{(plans1 - plans0) * per_minute:.0f}",
        "apiserver requests per idle minute": f"{len(window) * per_minute:.0f}",
        "  (most frequent, per minute)": top,
    }


def completions(
    api: client.ApiClient, watcher: Watcher, namespace: str, n: int, args: argparse.Namespace
) -> dict[str, str]:
    """Finish sample Jobs one by one and time each until the object's status says Warmed."""
    names = sorted(watcher.sdds)[:: max(1, n // args.completions)][: args.completions]
    finished = complete_jobs(api, watcher, namespace, names, args.completion_gap)
    watcher.wait(lambda: all(name in watcher.warmed for name in names), args.completion_timeout)
    delays = [watcher.warmed[name] - finished[name] for name in names if name in watcher.warmed]
    missing = len(names) - len(delays)
    p50, worst = percentile(delays, 0.5), max(delays, default=math.nan)
    text = f"{percentile(delays, 0.95):.2f} s (p50 {p50:.2f}, max {worst:.2f}, n={len(delays)})"
    if missing:
        text += f", {missing} not reflected within {args.completion_timeout:.0f} s"
    return {"Job completion reflected in status, p95": text}


def shutdown(op: OperatorProcess) -> str:
    began = time.monotonic()
    op.proc.send_signal(signal.SIGTERM)
    try:
        op.proc.wait(timeout=60)
    except Exception:
        return "> 60 s (killed)"
    finally:
        op.stop()
    return f"{time.monotonic() - began:.1f} s"


def print_table(rows: dict[int, dict[str, str]]) -> None:
    sizes = list(rows)
    labels = list(dict.fromkeys(label for row in rows.values() for label in row))
    print("\n| | " + " | ".join(f"N={n:,}" for n in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for label in labels:
        print(f"| {label} | " + " | ".join(rows[n].get(label, "") for n in sizes) + " |")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="100,300,1000")
    parser.add_argument("--idle", type=float, default=60.0, help="seconds of the idle window")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds before the idle window")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the Jobs")
    parser.add_argument("--completions", type=int, default=20, help="Jobs to finish per N")
    parser.add_argument("--completion-gap", type=float, default=0.5)
    parser.add_argument("--completion-timeout", type=float, default=90.0)
    parser.add_argument("--operator-src", type=Path, help="run the operator from this checkout")
    parser.add_argument("--env", action="append", default=[], help="KEY=VALUE for the operator")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    env = dict(item.split("=", 1) for item in args.env)
    if args.operator_src:
        env["PYTHONPATH"] = str(args.operator_src.resolve())
    rows = {}
    for n in (int(s) for s in args.sizes.split(",") if s):
        print(f"== N={n}", file=sys.stderr)
        rows[n] = run_size(n, args, env)
        print(json.dumps(rows[n], indent=1), file=sys.stderr)
    print_table(rows)


if __name__ == "__main__":
    main()
