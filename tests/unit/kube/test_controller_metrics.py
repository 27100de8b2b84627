"""controller-runtime's work queue figures for the followers, on a clock the test moves."""

from __future__ import annotations

from warmgate.kube import controller_metrics
from warmgate.kube.controller_metrics import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _gauges(queue: WorkQueue) -> dict[str, float]:
    return {family.name: family.samples[0].value for family in queue.collect()}


def _histogram(histogram: object, name: str) -> tuple[float, float]:
    child = histogram.labels(name, name)  # type: ignore[attr-defined]
    return child._sum.get(), sum(b.get() for b in child._buckets)


def test_an_object_waits_once_however_often_it_is_woken_then_its_sync_is_timed() -> None:
    clock, name = Clock(), "test-queue"
    queue = WorkQueue(name, clock)
    adds = controller_metrics.QUEUE_ADDS.labels(name, name)._value.get()
    queue.add("u1")
    clock.now += 1
    queue.add("u1")  # woken again while it waits: still one item, as client-go counts it
    queue.add("u2")
    assert controller_metrics.QUEUE_ADDS.labels(name, name)._value.get() == adds + 2
    assert _gauges(queue)["workqueue_depth"] == 2
    clock.now += 2
    token = queue.start("u1")  # waited 3 s
    assert _histogram(controller_metrics.QUEUE_LATENCY, name) == (3.0, 1)
    clock.now += 5
    queue.discard("u2")  # deleted while it waited: gone without a sync
    assert _gauges(queue) == {
        "workqueue_depth": 0,
        "workqueue_unfinished_work_seconds": 5.0,
        "workqueue_longest_running_processor_seconds": 5.0,
    }
    queue.done(token)
    assert _histogram(controller_metrics.QUEUE_WORK, name) == (5.0, 1)
    assert _gauges(queue)["workqueue_longest_running_processor_seconds"] == 0


def test_the_buckets_and_results_are_controller_runtimes() -> None:
    assert controller_metrics.RECONCILE_BUCKETS[:3] == (0.005, 0.01, 0.025)
    assert len(controller_metrics.RECONCILE_BUCKETS) == 40
    assert controller_metrics.QUEUE_BUCKETS[0] == 1e-8  # ExponentialBuckets(10e-9, 10, 12)
    assert len(controller_metrics.QUEUE_BUCKETS) == 12
    assert controller_metrics.host_of("https://127.0.0.1:6443") == "127.0.0.1:6443"
