"""What each kind of request the operator sends costs the apiserver and etcd (issue 14).

Run: KUBEBUILDER_ASSETS=... .venv/bin/python benchmarks/bench_api_costs.py [--n 400]
On a fresh audited control plane: N requests of each kind in turn (after N SpecDecodeDeployments,
N Events, N small and N 70 KB ConfigMaps and N Jobs exist in one namespace), each kind's CPU
seconds of kube-apiserver and etcd per request and its wall time, e.g. a list by label from etcd
against the same list from the watch cache. Prints figures only; docs/benchmarks.md has them.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from bench_creation_floor import control_plane_cpu  # noqa: E402
from bench_operator_scale import manifests, start_control_plane  # noqa: E402
from kubernetes import client  # noqa: E402

from warmgate.api.constants import GROUP, PLURAL, VERSION  # noqa: E402

LABEL = "warmgate.dev/name"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=400)
    n = parser.parse_args().n
    cp = start_control_plane()
    try:
        ns = "costs"
        cp.kubectl("create", "namespace", ns)
        api = cp.api_client()
        custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
        batch = client.BatchV1Api(api)
        docs = manifests(n, ns)
        names = [d["metadata"]["name"] for d in docs]
        sdd: tuple[str, str, str, str] = (GROUP, VERSION, ns, PLURAL)
        status = {"status": {"observedGeneration": 1, "phase": "Warming"}}
        note = {"metadata": {"annotations": {"example.dev/note": "x" * 300}}}
        cheap = {"_preload_content": False}
        print("| request | apiserver CPU | etcd CPU | wall |\n|---|---|---|---|")

        def measure(label: str, call: Callable[[int], Any]) -> None:
            api0, etcd0 = control_plane_cpu(cp)
            began = time.monotonic()
            for i in range(n):
                call(i)
            api1, etcd1 = control_plane_cpu(cp)
            per = 1000 / n
            print(
                f"| {label} | {(api1 - api0) * per:.1f} ms | {(etcd1 - etcd0) * per:.1f} ms "
                f"| {(time.monotonic() - began) * per:.1f} ms |",
                flush=True,
            )

        measure("create SpecDecodeDeployment", lambda i: custom.create_namespaced_custom_object(
            *sdd, docs[i], **cheap))  # fmt: skip
        measure("patch its status", lambda i: custom.patch_namespaced_custom_object_status(
            *sdd, names[i], status, **cheap))  # fmt: skip
        measure("patch its annotations (as kopf)", lambda i: custom.patch_namespaced_custom_object(
            *sdd, names[i], note, **cheap))  # fmt: skip
        measure(
            "create Event",
            lambda i: core.create_namespaced_event(ns, _event(ns, names[i]), **cheap),
        )
        for size in (2_000, 70_000):
            measure(f"create ConfigMap of {size // 1000} KB", lambda i, size=size: (
                core.create_namespaced_config_map(ns, _config_map(i, size), **cheap)))  # fmt: skip
        measure("create Job", lambda i: batch.create_namespaced_job(ns, _job(i), **cheap))
        jobs, maps = batch.list_namespaced_job, core.list_namespaced_config_map
        for version, how in ((None, "etcd"), ("0", "watch cache")):
            fresh = {"resource_version": version} if version else {}
            measure(f"list Jobs by label ({n} in the namespace), {how}", lambda i, f=fresh: (
                jobs(ns, label_selector=f"{LABEL}=n{i}", **f, **cheap)))  # fmt: skip
            measure(f"list ConfigMaps by label ({2 * n}), {how}", lambda i, f=fresh: (
                maps(ns, label_selector=f"{LABEL}=n{i}", **f, **cheap)))  # fmt: skip
        measure("list Events by involvedObject.uid", lambda i: core.list_namespaced_event(
            ns, field_selector=f"involvedObject.uid=u{i}", **cheap))  # fmt: skip
    finally:
        cp.stop()


def _event(ns: str, name: str) -> dict[str, Any]:
    involved = {"kind": "SpecDecodeDeployment", "name": name, "namespace": ns}
    return {"metadata": {"generateName": "e-"}, "involvedObject": involved, "reason": "Created",
            "message": "Created ConfigMap a, ConfigMap b, Job c", "type": "Normal"}  # fmt: skip


def _config_map(i: int, size: int) -> dict[str, Any]:
    meta = {"name": f"cm{size}-{i}", "labels": {LABEL: f"n{i}"}}
    return {"metadata": meta, "data": {"plan.json": "x" * size}}


def _job(i: int) -> dict[str, Any]:
    pod = {"restartPolicy": "Never", "containers": [{"name": "w", "image": "vllm-gaudi:test"}]}
    meta = {"name": f"job-{i}", "labels": {LABEL: f"n{i}"}}
    return {"metadata": meta, "spec": {"backoffLimit": 0, "template": {"spec": pod}}}


if __name__ == "__main__":
    main()
