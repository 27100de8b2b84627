"""Benchmark the test harness's control plane: warm start, per-test overhead, client latency.

Run: .venv/bin/python benchmarks/bench_controlplane.py [--starts N]
Prints figures only; docs/testing.md records them. Needs the provisioned assets (make assets).
"""

from __future__ import annotations

import argparse
import statistics
import time
import uuid
from collections.abc import Callable

from warmgate.devcluster.controlplane import ControlPlane, find_assets


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    out = []
    for _ in range(repeat):
        began = time.perf_counter()
        fn()
        out.append(time.perf_counter() - began)
    return out


def line(label: str, samples: list[float]) -> None:
    ms = sorted(s * 1000 for s in samples)
    median = statistics.median(ms)
    print(f"{label:<48} median {median:8.1f} ms  min {ms[0]:8.1f}  max {ms[-1]:8.1f}  n={len(ms)}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3)
    args = parser.parse_args()
    assets = find_assets()
    starts: list[float] = []
    for _ in range(args.starts):
        cp = ControlPlane(assets).start()
        starts.append(cp.startup_seconds)
        cp.stop()
    line("control plane start (certs+etcd+apiserver ready)", starts)
    with ControlPlane(assets) as cp:
        create = lambda: cp.kubectl("create", "namespace", f"b-{uuid.uuid4().hex[:8]}")  # noqa: E731
        line("namespace fixture (kubectl create namespace)", timed(create, 10))
        line("kubectl get namespaces", timed(lambda: cp.kubectl("get", "namespaces"), 10))
        from kubernetes import client

        with cp.api_client() as api:
            core = client.CoreV1Api(api)
            line("python client list_namespace", timed(core.list_namespace, 20))


if __name__ == "__main__":
    main()
