"""Benchmark the local single-node cluster: image builds, warm start, apply-to-Job/-Ready.

Run: .venv/bin/python benchmarks/bench_devcluster.py [--sdds N] [--cold-images]
Prints figures only; docs/testing.md and docs/benchmarks.md record them. Needs root and the
provisioned node (make assets); prints why and exits 0 where the node cannot start.
--cold-images builds every image into an empty cache (WARMGATE_DEVCLUSTER_CACHE in a temp
folder) first and reports each build; without it the cached archives are reused.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))


def cold_images() -> None:
    """Build the four images into an empty cache, in a child (the cache path is read at import)."""
    with tempfile.TemporaryDirectory(prefix="warmgate-bench-images-") as tmp:
        env = {**os.environ, "WARMGATE_DEVCLUSTER_CACHE": tmp}
        code = "from warmgate.devcluster.images import Builder; Builder(print).ensure()"
        began = time.monotonic()
        subprocess.run([sys.executable, "-c", code], env=env, check=True)
        print(f"{'cold image build, all four images':<44} {time.monotonic() - began:7.1f} s")


def measure(sdds: int) -> None:
    from e2e_support import E2ECluster, sdd

    from warmgate.devcluster import operator
    from warmgate.devcluster.assets import node_assets
    from warmgate.devcluster.cluster import DevCluster
    from warmgate.devcluster.images import Builder

    began = time.monotonic()
    images = Builder(lambda m: None).ensure()
    print(f"{'image check, cached archives':<44} {time.monotonic() - began:7.1f} s")
    with DevCluster(node_assets(), images, lambda m: None) as cluster:
        print(f"{'warm cluster start (lock to node Ready)':<44} {cluster.startup_seconds:7.1f} s")
        began = time.monotonic()
        operator.install(cluster.assets, cluster.kubeconfig, images.operator.ref)
        print(f"{'helm install, operator Pod running':<44} {time.monotonic() - began:7.1f} s")
        e2e = E2ECluster(cluster, images)
        to_job, to_ready = [], []
        for i in range(sdds):
            ns = f"bench-{i}"
            e2e.kubectl("create", "namespace", ns)
            began = time.monotonic()
            e2e.apply(sdd("bench", ns, images.engine.ref))
            while not e2e.items("jobs", ns, "bench"):
                time.sleep(0.2)
            to_job.append(time.monotonic() - began)
            e2e.kubectl("wait", "-n", ns, "sdd/bench", "--for=condition=Ready", "--timeout=300s")
            to_ready.append(time.monotonic() - began)
            status = e2e.get("sdd", "-n", ns, "bench")["status"]["warmup"]
            job = f"Job {status.get('durationSeconds')} s, {status.get('attempts')} attempt(s)"
            print(f"  sdd {i}: to Job {to_job[-1]:5.1f} s, to Ready {to_ready[-1]:5.1f} s, {job}")
        print(f"{'apply-to-Job, median':<44} {statistics.median(to_job):7.1f} s")
        print(f"{'apply-to-Ready, median':<44} {statistics.median(to_ready):7.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sdds", type=int, default=3)
    parser.add_argument("--cold-images", action="store_true")
    args = parser.parse_args()
    from warmgate.devcluster.assets import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        print(f"skipped: no local node ({reason})")
        return
    if args.cold_images:
        cold_images()
    measure(args.sdds)


if __name__ == "__main__":
    main()
