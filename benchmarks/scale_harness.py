"""The measuring parts of bench_operator_scale.py: an audited apiserver, watches, process stats.

The apiserver is the harness' real one (`warmgate.devcluster.controlplane`) with two extra users for
operator processes and an audit log of every request they make (one line per request, at its
receipt), so the benchmark counts the operator's API requests exactly and tells two operators
apart. A watch thread records when each Job appears and when each object's status changes.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.watch.watch import iter_resp_lines

from warmgate.api import GROUP, PLURAL, VERSION
from warmgate.devcluster.controlplane import ControlPlane

OPERATOR_USERS = ("warmgate-operator-a", "warmgate-operator-b")
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
# Only RequestReceived is kept: exactly one audit line per request, long watches included.
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted, ResponseComplete, Panic]
rules:
  - level: Metadata
    users: [{users}]
  - level: None
"""


@dataclass
class AuditedControlPlane(ControlPlane):
    """The test control plane, plus the operator users and an audit log of their requests."""

    operator_tokens: dict[str, str] = field(
        default_factory=lambda: {user: os.urandom(16).hex() for user in OPERATOR_USERS}
    )

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    def _apiserver_args(self, etcd_url: str, port: int) -> list[str]:
        with (self.workdir / "tokens.csv").open("a") as tokens:
            for uid, (user, token) in enumerate(self.operator_tokens.items(), start=100):
                tokens.write(f'{token},{user},{uid},"system:masters"\n')
        policy = self.workdir / "audit-policy.yaml"
        policy.write_text(AUDIT_POLICY.format(users=", ".join(OPERATOR_USERS)))
        return [
            *super()._apiserver_args(etcd_url, port),
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
        ]

    def operator_kubeconfig(self, user: str) -> Path:
        """A kubeconfig that logs in as ``user`` (one of OPERATOR_USERS)."""
        path = self.workdir / f"kubeconfig-{user}"
        path.write_text(self.kubeconfig.read_text().replace(self.token, self.operator_tokens[user]))
        return path


@dataclass(frozen=True)
class Request:
    """One audited request of an operator."""

    at: float
    user: str
    verb: str
    resource: str

    @property
    def writes(self) -> bool:
        return self.verb in WRITE_VERBS


def audited(cp: AuditedControlPlane) -> list[Request]:
    """Every operator request the apiserver logged so far."""
    found = []
    if not cp.audit_log.exists():
        return found
    with cp.audit_log.open() as log:
        for line in log:
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            resource = "/".join(p for p in (ref.get("resource"), ref.get("subresource")) if p)
            at = datetime.datetime.fromisoformat(event["requestReceivedTimestamp"]).timestamp()
            found.append(Request(at, event["user"]["username"], event["verb"], resource))
    return found


def count_by(requests: list[Request], key: Callable[[Request], str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for request in requests:
        out[key(request)] = out.get(key(request), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


class Watcher:
    """Watches the SpecDecodeDeployments and Jobs of a namespace and timestamps what it sees."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        self.sdds: dict[str, dict[str, Any]] = {}
        self.jobs: dict[str, dict[str, Any]] = {}
        self.job_seen: dict[str, float] = {}
        self.reported: dict[str, float] = {}  # status.warmup.jobName first seen
        self.warmed: dict[str, float] = {}  # Warmed=True first seen
        self._responses: list[Any] = []
        self._stop = threading.Event()
        custom, batch = client.CustomObjectsApi(api), client.BatchV1Api(api)

        def sdd_stream(rv: str | None) -> Any:
            return custom.list_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, watch=True, resource_version=rv,
                _preload_content=False, timeout_seconds=3600,
            )  # fmt: skip

        def job_stream(rv: str | None) -> Any:
            return batch.list_namespaced_job(
                namespace, watch=True, resource_version=rv, _preload_content=False,
                timeout_seconds=3600,
            )  # fmt: skip

        for stream, on_event in ((sdd_stream, self._on_sdd), (job_stream, self._on_job)):
            threading.Thread(target=self._run, args=(stream, on_event), daemon=True).start()

    def _run(self, stream: Callable[[str | None], Any], on_event: Callable[[Any], None]) -> None:
        version: str | None = None
        while not self._stop.is_set():
            try:
                response = stream(version)
                self._responses.append(response)
                for line in iter_resp_lines(response):
                    event = json.loads(line)
                    if event["type"] == "ERROR":
                        version = None
                        break
                    version = event["object"]["metadata"]["resourceVersion"]
                    on_event(event)
            except Exception:
                time.sleep(0.2)

    def _on_sdd(self, event: dict[str, Any]) -> None:
        now, obj = time.time(), event["object"]
        name = obj["metadata"]["name"]
        self.sdds[name] = obj
        status = obj.get("status") or {}
        if (status.get("warmup") or {}).get("jobName"):
            self.reported.setdefault(name, now)
        if any(
            c.get("type") == "Warmed" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ):
            self.warmed.setdefault(name, now)

    def _on_job(self, event: dict[str, Any]) -> None:
        obj = event["object"]
        name = obj["metadata"]["name"]
        self.jobs[name] = obj
        self.job_seen.setdefault(name, time.time())

    def wait(self, done: Callable[[], bool], timeout: float, poll: float = 0.2) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if done():
                return True
            time.sleep(poll)
        return done()

    def stop(self) -> None:
        self._stop.set()
        for response in self._responses:
            with contextlib.suppress(RuntimeError):  # that stream ended already
                response.shutdown()  # unblocks the reading thread; close() would wait for it


def cpu_seconds(pid: int) -> float:
    """User plus system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid: int) -> float:
    """The process' peak resident set size (VmHWM) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_mb(pid: int) -> float:
    """The process' resident set size (VmRSS) in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def metric(text: str, name: str) -> float:
    """The sum of every sample of ``name`` in a Prometheus text exposition (0 when absent)."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and line[len(name) : len(name) + 1] in (" ", "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def percentile(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by nearest rank; NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
