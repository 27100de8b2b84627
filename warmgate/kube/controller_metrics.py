"""The standard controller metrics, named and labelled as controller-runtime names them.

Where the concept is the same, the metric's name, its label names and its histogram buckets
are controller-runtime's (v0.24: `pkg/internal/controller/metrics/metrics.go`,
`pkg/internal/metrics/workqueue.go`, `pkg/metrics/client_go_adapter.go`,
`pkg/metrics/leaderelection.go`), so dashboards and alerts written for controller-runtime
operators read warmgate's too (issue 37). What each one means here:

- **reconcile**: one sync of one object by the followers (`runtime/follower.py`), whatever
  triggered it; the controller is `specdecodedeployment`, as controller-runtime names a
  controller after its kind. Its result: `error` (an API failure, retried after the backoff, or
  the sync raised), `requeue_after` (a sync that asked to come back soon: every 15 s while a
  runner runs), `success` (the next pass is the safety resync, the counterpart of
  controller-runtime's SyncPeriod). `requeue` (an immediate rate-limited requeue without an
  error) never happens here and stays 0, as the four results are exported from the start.
- **work queue**: the followers are the work queue (`name` and `controller` both
  `specdecodedeployment`): an object is added when woken (a watch event of it or a child) or
  when its resync or retry is due, and leaves it when its sync starts in a thread, after the
  coalescing pause, the resync limit and a free thread; an object added again while it
  queues is counted once, as client-go's queue does. `priority` is absent, as it is on a
  controller-runtime queue without priorities.
- **rest client**: every request to the API server, the operator's own client
  (`kube_cluster.request`: the syncs and the Lease) and kopf's session (`api_session`: the
  watches, kopf's patches and Events); `code` is the HTTP status or `<error>` for a request
  without an answer (a refused, reset or timed-out connection), as client-go's; the duration
  runs until the answer's headers (a watch: until it started), as client-go measures it.
- **leader election**: `leader_election_master_status{name}` (the Lease's name), 1 while this
  replica holds the Lease, 0 while it stands by; not exported without a Lease, as
  controller-runtime exports nothing without leader election.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Iterator
from importlib import metadata
from platform import python_version
from typing import Final
from urllib.parse import urlsplit

from prometheus_client import REGISTRY, Counter, Gauge, Histogram, Info
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

CONTROLLER: Final = "specdecodedeployment"

# controller-runtime's buckets, verbatim.
RECONCILE_BUCKETS: Final = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)  # fmt: skip
# prometheus.ExponentialBuckets(10e-9, 10, 12)
QUEUE_BUCKETS: Final = (1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 0.01, 0.1, 1.0, 10.0, 100.0, 1000.0)
REST_BUCKETS: Final = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

RESULTS: Final = ("success", "error", "requeue", "requeue_after")
NO_ANSWER: Final = "<error>"

RECONCILE_TOTAL = Counter(
    "controller_runtime_reconcile",
    "Total number of reconciliations per controller",
    ["controller", "result"],
)
RECONCILE_ERRORS = Counter(
    "controller_runtime_reconcile_errors",
    "Total number of reconciliation errors per controller",
    ["controller"],
)
RECONCILE_PANICS = Counter(
    "controller_runtime_reconcile_panics",
    "Total number of reconciliation panics per controller (here: syncs that raised)",
    ["controller"],
)
RECONCILE_TIME = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=RECONCILE_BUCKETS,
)
MAX_CONCURRENT = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
)
ACTIVE_WORKERS = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
)
for _result in RESULTS:
    RECONCILE_TOTAL.labels(CONTROLLER, _result)  # exported as 0 from the start
RECONCILE_ERRORS.labels(CONTROLLER)
RECONCILE_PANICS.labels(CONTROLLER)
ACTIVE_WORKERS.labels(CONTROLLER).set(0)

QUEUE_ADDS = Counter(
    "workqueue_adds", "Total number of adds handled by workqueue", ["name", "controller"]
)
QUEUE_LATENCY = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=QUEUE_BUCKETS,
)
QUEUE_WORK = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes.",
    ["name", "controller"],
    buckets=QUEUE_BUCKETS,
)
QUEUE_RETRIES = Counter(
    "workqueue_retries",
    "Total number of items added to the workqueue with a non-zero delay (retries after a "
    "failure's backoff, and requeue_after)",
    ["name", "controller"],
)

REST_REQUESTS = Counter(
    "rest_client_requests",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method", "host"],
)
REST_LATENCY = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb and host.",
    ["verb", "host"],
    buckets=REST_BUCKETS,
)

LEADER = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 "
    "indicates master. 'name' is the string used to identify the lease. Please make sure to "
    "group by name.",
    ["name"],
)

BUILD = Info("warmgate_build", "The operator's version and Python (always 1).")


def _version() -> str:
    try:
        return metadata.version("warmgate")
    except metadata.PackageNotFoundError:  # run from a source tree without installing
        return "unknown"


BUILD.info({"version": _version(), "python_version": python_version()})


def observe_reconcile(result: str, seconds: float, *, raised: bool = False) -> None:
    """One sync's result and duration (``raised``: it raised, a bug: also a panic)."""
    RECONCILE_TOTAL.labels(CONTROLLER, result).inc()
    if result == "error":
        RECONCILE_ERRORS.labels(CONTROLLER).inc()
    if raised:
        RECONCILE_PANICS.labels(CONTROLLER).inc()
    RECONCILE_TIME.labels(CONTROLLER).observe(seconds)


def host_of(url: str) -> str:
    """The ``host`` label of a server URL: host and port as written (Go's ``url.Host``)."""
    return urlsplit(url).netloc


def observe_request(method: str, host: str, code: int | None, seconds: float) -> None:
    """One API request: its answer's status (None: no answer) and how long it took."""
    REST_REQUESTS.labels(str(code) if code else NO_ANSWER, method.upper(), host).inc()
    REST_LATENCY.labels(method.upper(), host).observe(seconds)


class WorkQueue(Collector):
    """The followers seen as controller-runtime's work queue: the objects waiting for their
    sync to start (added, not yet started) and the syncs running, at each scrape.

    Thread-safe: objects are added on the event loop, and their syncs start and end in the
    executor's threads.
    """

    def __init__(self, name: str = CONTROLLER, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self._clock = clock
        self._queued: dict[str, float] = {}  # uid -> when added
        self._running: dict[int, float] = {}  # token -> when started
        self._tokens = itertools.count()
        self._lock = threading.Lock()
        self._adds = QUEUE_ADDS.labels(name, name)
        self._latency = QUEUE_LATENCY.labels(name, name)
        self._work = QUEUE_WORK.labels(name, name)
        self._retries = QUEUE_RETRIES.labels(name, name)

    def add(self, uid: str) -> None:
        """The object waits for a sync (again); counted once while it waits."""
        with self._lock:
            if uid in self._queued:
                return
            self._queued[uid] = self._clock()
        self._adds.inc()

    def discard(self, uid: str) -> None:
        """The object leaves the queue without a sync (deleted, or only an echo woke it)."""
        with self._lock:
            self._queued.pop(uid, None)

    def start(self, uid: str) -> int:
        """Its sync starts: the time it waited; a token for `done`."""
        now = self._clock()
        with self._lock:
            added = self._queued.pop(uid, None)
            token = next(self._tokens)
            self._running[token] = now
        if added is not None:
            self._latency.observe(max(0.0, now - added))
        return token

    def done(self, token: int) -> None:
        """The sync of `start`'s token ended."""
        now = self._clock()
        with self._lock:
            started = self._running.pop(token, None)
        if started is not None:
            self._work.observe(max(0.0, now - started))

    def retry(self) -> None:
        """The object comes back after a delay it asked for: a failure's backoff, a poll."""
        self._retries.inc()

    def depth(self) -> int:
        with self._lock:
            return len(self._queued)

    def collect(self) -> Iterator[Metric]:
        now = self._clock()
        with self._lock:
            depth = len(self._queued)
            running = [now - started for started in self._running.values()]
        labels = ["name", "controller"]
        values = [self.name, self.name]
        families = (
            ("workqueue_depth", "Current depth of workqueue", float(depth)),
            (
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been "
                "observed by work_duration. Large values indicate stuck threads. One can deduce "
                "the number of stuck threads by observing the rate at which this increases.",
                sum(running),
            ),
            (
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                max(running, default=0.0),
            ),
        )
        for name, help_text, value in families:
            family = GaugeMetricFamily(name, help_text, labels=labels)
            family.add_metric(values, value)
            yield family


FOLLOWER_QUEUE = WorkQueue()
REGISTRY.register(FOLLOWER_QUEUE)


__all__ = [
    "CONTROLLER",
    "FOLLOWER_QUEUE",
    "LEADER",
    "WorkQueue",
    "host_of",
    "observe_reconcile",
    "observe_request",
]
