"""The shared plan cache: one planning per planner input, an LRU bounded by bytes, pins."""

from __future__ import annotations

import threading
import time
from typing import Any

from support.examples import example_sdd

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import PlanningResult, evaluate
from warmgate.reconcile.planning.planning_cache import PlanningCache, deep_size, plan_key


class Counting:
    """The real planner, counting its calls per object name."""

    def __init__(self, delay: float = 0.0) -> None:
        self.calls: list[str] = []
        self.delay = delay

    def __call__(self, sdd: SpecDecodeDeployment) -> PlanningResult:
        self.calls.append(sdd.metadata.name or "")
        time.sleep(self.delay)
        return evaluate(sdd)


def sdd(name: str, stem: str = "minimal-ngram", **spec: Any) -> SpecDecodeDeployment:
    return example_sdd(stem, namespace="ns", name=name, uid=f"uid-{name}", **spec)


def test_objects_with_the_same_inputs_share_one_planning() -> None:
    planner = Counting()
    cache = PlanningCache(planner)
    first = cache.get(sdd("a"))
    assert cache.get(sdd("b")) is first
    assert cache.get(sdd("a")) is first
    assert planner.calls == ["a"]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (2, 1, 1)


def test_the_key_follows_every_planner_input_and_nothing_else() -> None:
    base = plan_key(sdd("a"))
    assert plan_key(sdd("b", serving={"replicas": 3})) == base  # not a planner input
    assert plan_key(sdd("a", warmup={"timeoutSeconds": 7200})) != base
    assert plan_key(sdd("a", stem="llama31-8b-seeds")) != base
    engine = sdd("a").spec.engine.model_dump(by_alias=True, exclude_none=True)
    assert plan_key(sdd("a", engine={**engine, "maxNumSeqs": 8})) != base


def test_the_lru_is_bounded_by_bytes_and_pins_keep_an_object_from_re_planning() -> None:
    planner = Counting()
    cache = PlanningCache(planner, max_bytes=1, size_of=lambda _: 10)  # room for one result only
    kept = cache.get(sdd("a"))
    cache.get(sdd("b", stem="llama31-8b-seeds"))  # evicts a's result from the LRU
    assert cache.stats().evictions == 1
    assert cache.get(sdd("a")) is kept  # a's own pin: no re-plan on a resync
    assert cache.get(sdd("c")) is kept  # found through a's pin by an object of the same inputs
    assert planner.calls == ["a", "b"]
    cache.forget("uid-a")
    cache.forget("uid-c")
    del kept
    cache.get(sdd("b", stem="llama31-8b-seeds"))  # b's result back on top of the LRU
    cache.get(sdd("c"))  # a's result is unpinned and evicted: planned again
    assert planner.calls == ["a", "b", "c"]


def test_concurrent_asks_for_one_input_plan_once() -> None:
    planner = Counting(delay=0.2)
    cache = PlanningCache(planner)
    results: list[PlanningResult] = []
    threads = [
        threading.Thread(target=lambda i=i: results.append(cache.get(sdd(f"o{i}"))))
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(planner.calls) == 1
    assert len({id(r) for r in results}) == 1


def test_a_result_is_measured_in_bytes() -> None:
    result = evaluate(sdd("a"))
    assert result.plan is not None
    buckets = result.plan.decode_buckets
    assert deep_size(result) > deep_size(result.plan) > deep_size(buckets) > 50 * len(buckets)


def test_the_size_counts_each_object_once_through_dicts_lists_and_slots() -> None:
    import enum
    import sys

    class Color(enum.StrEnum):
        RED = "red"

    class Slotted:
        __slots__ = ("a", "b")

        def __init__(self, a: object, b: object) -> None:
            self.a, self.b = a, b

    text, numbers = "x" * 100, [1001, 1002]
    inner = Slotted(text, numbers)
    outer = {"k": [inner, inner, text], "c": Color.RED}
    size = sys.getsizeof
    expected = size(outer) + size("k") + size("c") + size(outer["k"]) + size(inner)
    expected += size(text) + size(numbers) + size(1001) + size(1002) + size(Color.RED)
    assert deep_size(outer) == expected
