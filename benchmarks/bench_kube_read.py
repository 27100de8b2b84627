"""What one read of an object costs the tests: `kubectl get -o json` against the in-process read
of tests/support/kube_read.py (issue 35).

Run: .venv/bin/python benchmarks/bench_kube_read.py [--n 60]
On a fresh control plane with the CRD: N reads of one SpecDecodeDeployment and N lists of
ConfigMaps by label, each way in turn; prints per read the wall time, the client's CPU (kubectl's
own process, or the test process's) and the apiserver's. Prints figures only; docs/benchmarks.md
has them.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
sys.path.insert(0, str(HERE))

from bench_creation_floor import control_plane_cpu  # noqa: E402
from bench_operator_scale import start_control_plane  # noqa: E402
from support.api_controllers import seeds_example  # noqa: E402
from support.kube_read import Reader  # noqa: E402


def _cpu(who: int) -> float:
    used = resource.getrusage(who)
    return used.ru_utime + used.ru_stime


def measure(n: int, read: Callable[[], object], cp_cpu: Callable[[], float]) -> tuple[float, ...]:
    """ms per read: wall, the kubectl children's CPU, this process's CPU, the apiserver's CPU."""
    wall, server = time.monotonic(), cp_cpu()
    kids, own = _cpu(resource.RUSAGE_CHILDREN), _cpu(resource.RUSAGE_SELF)
    for _ in range(n):
        read()
    per = 1000 / n
    return (
        (time.monotonic() - wall) * per,
        (_cpu(resource.RUSAGE_CHILDREN) - kids) * per,
        (_cpu(resource.RUSAGE_SELF) - own) * per,
        (cp_cpu() - server) * per,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=60)
    n = parser.parse_args().n
    cp = start_control_plane()
    try:
        ns = "reads"
        cp.kubectl("create", "namespace", ns)
        cp.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(ns, "one")))
        for i in range(20):
            cp.kubectl("create", "configmap", f"c{i}", "-n", ns, f"--from-literal=k={i}")
            cp.kubectl("label", "configmap", f"c{i}", "-n", ns, f"tier={i % 2}")
        reader = Reader(cp.kubeconfig)

        def kubectl(*args: str) -> object:
            return json.loads(cp.kubectl("get", *args, "-o", "json").stdout)

        def server_cpu() -> float:
            return control_plane_cpu(cp)[0]

        reads = {
            "the object": ("sdd", "one", "-n", ns),
            "a list by label (10 of 20)": ("configmaps", "-n", ns, "-l", "tier=1"),
        }
        print(f"{n} reads each, ms per read: wall, kubectl's CPU, this process's CPU, apiserver's")
        for what, args in reads.items():
            assert reader.get(*args) is not None
            for how, read in (
                ("kubectl get -o json", lambda a=args: kubectl(*a)),
                ("in-process read", lambda a=args: reader.get(*a)),
            ):
                wall, kids, own, server = measure(n, read, server_cpu)
                print(
                    f"  {what:28} {how:20} {wall:6.1f} wall  {kids:5.1f} kubectl  "
                    f"{own:5.1f} self  {server:5.1f} apiserver"
                )
    finally:
        cp.stop()


if __name__ == "__main__":
    main()
