"""Benchmark the operator's failover between two replicas with leader election on a Lease
(issue 14 item 4; a Lease since issue 23 item 9, kopf peering before).

Run: .venv/bin/python benchmarks/bench_operator_failover.py [--objects 50] [--rounds 3]
It starts a fresh etcd + kube-apiserver with an audit log (`scale_harness`), two `warmgate
operator` processes with `WARMGATE_LEADER_LEASE` (each logs in as its own user, so the audit
log tells their requests apart), applies the objects, and then, per round, stops the active
replica (SIGKILL: a crash; SIGTERM: a graceful stop) and applies one new object at that instant.
It prints the time until that object has its Job (the standby acted), the replica that acted,
and the write requests the standby sent while the other one was active (its Lease attempts
excluded): they must be zero, no double writes. A replacement standby starts after each round.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))
sys.path.insert(0, str(REPO / "tests"))

from scale_harness import OPERATOR_USERS, AuditedControlPlane, Watcher, audited  # noqa: E402
from support.api_controllers import seeds_example  # noqa: E402

from warmgate.devcluster.controlplane import OperatorProcess, find_assets  # noqa: E402

CRDS = (REPO / "crds" / "warmgate.dev_specdecodedeployments.yaml",)
NAMESPACE = "failover"


def progress(message: str) -> None:
    print(f"  [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def start_operator(cp: AuditedControlPlane, user: str, duration: int) -> OperatorProcess:
    log = Path(tempfile.mkdtemp(prefix="warmgate-failover-")) / f"{user}.log"
    env = {
        "WARMGATE_LEADER_LEASE": "warmgate-bench",
        "WARMGATE_LEASE_NAMESPACE": NAMESPACE,
        "WARMGATE_LEASE_DURATION": str(duration),
    }
    op = OperatorProcess(cp.operator_kubeconfig(user), NAMESPACE, log, env=env).wait_alive()
    time.sleep(1.0)  # the first one holds the Lease before the next one starts
    return op


def apply(cp: AuditedControlPlane, name: str) -> None:
    cp.kubectl("apply", "-f", "-", stdin=json.dumps(seeds_example(NAMESPACE, name)))


def job_of(watcher: Watcher, name: str) -> bool:
    status = (watcher.sdds.get(name) or {}).get("status") or {}
    return bool((status.get("warmup") or {}).get("jobName"))


def standby_writes(cp: AuditedControlPlane, user: str, since: float, until: float) -> int:
    return sum(
        1
        for r in audited(cp)
        if r.user == user and since <= r.at < until and r.writes and "leases" not in r.resource
    )


def first_writer(cp: AuditedControlPlane, since: float) -> str:
    writes = [r for r in audited(cp) if r.at >= since and r.writes and "leases" not in r.resource]
    return min(writes, key=lambda r: r.at).user if writes else "nobody"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--objects", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per stop signal")
    parser.add_argument("--lifetime", type=int, default=10, help="WARMGATE_LEASE_DURATION")
    args = parser.parse_args()
    cp = AuditedControlPlane(find_assets()).start()
    users = list(OPERATOR_USERS) * (2 * args.rounds + 2)
    operators: list[OperatorProcess] = []
    try:
        for crd in CRDS:
            cp.kubectl("apply", "--server-side", "-f", str(crd))
            cp.kubectl("wait", "--for=condition=Established", "--timeout=60s", "-f", str(crd))
        cp.kubectl("create", "namespace", NAMESPACE)
        watcher = Watcher(cp.api_client(), NAMESPACE)
        operators = [
            start_operator(cp, users[0], args.lifetime),
            start_operator(cp, users[1], args.lifetime),
        ]
        began = time.time()
        for i in range(args.objects):
            apply(cp, f"obj-{i:03d}")
        names = [f"obj-{i:03d}" for i in range(args.objects)]
        watcher.wait(lambda: all(job_of(watcher, n) for n in names), 300)
        progress(f"{args.objects} objects have their Job after {time.time() - began:.1f} s")
        rows = []
        for number, sig in enumerate(
            [signal.SIGKILL] * args.rounds + [signal.SIGTERM] * args.rounds
        ):
            active = operators[-2]
            quiet = standby_writes(cp, users[len(operators) - 1], began, time.time())
            stopped = time.time()
            active.proc.send_signal(sig)
            probe = f"probe-{number}"
            apply(cp, probe)
            acted = watcher.wait(
                lambda probe=probe: job_of(watcher, probe), 4 * args.lifetime + 60, poll=0.05
            )
            took = time.time() - stopped
            active.proc.wait(timeout=60)
            active.stop()
            rows.append(
                (sig.name, took if acted else float("nan"), first_writer(cp, stopped), quiet)
            )
            progress(f"{sig.name}: the standby acted after {took:.1f} s")
            operators.append(start_operator(cp, users[len(operators)], args.lifetime))
            began = time.time()
        watcher.stop()
        print(
            "\n| stop | standby acted after | first writer | standby's writes while standing by |"
        )
        print("|---|---|---|---|")
        for name, took, writer, quiet in rows:
            print(f"| {name} | {took:.1f} s | {writer} | {quiet} |")
        print(f"\nlease duration {args.lifetime} s, {args.objects} objects")
    finally:
        for op in operators:
            if op.proc.poll() is None:
                op.stop()
        cp.stop()


if __name__ == "__main__":
    main()
