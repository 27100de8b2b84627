"""Metrics of the operator's own work: its one API client and its shared plan cache (issue 14).

They are read when /metrics is scraped (a custom collector), not counted on every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from warmgate.reconcile.planning.planning_cache import CacheStats

# (connections opened, requests sent) by the API client so far.
ClientCounters = Callable[[], tuple[int, int]]
PlanStats = Callable[[], "CacheStats"]


class ClientCollector(Collector):
    """The API client's pool: a flat count of connections under a growing count of requests
    shows that the calls reuse the kept-alive connections."""

    def __init__(self, counters: ClientCounters) -> None:
        self._counters = counters

    def collect(self) -> Iterator[Metric]:
        opened, sent = self._counters()
        yield CounterMetricFamily(
            "warmgate_api_connections_opened",
            "Connections the operator's API client opened (its pool keeps them alive).",
            opened,
        )
        yield CounterMetricFamily(
            "warmgate_api_requests", "Requests the operator's API client sent.", sent
        )


class PlanCacheCollector(Collector):
    """The shared plan cache: hits (objects that reused a plan), misses (plannings)."""

    def __init__(self, stats: PlanStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        stats = self._stats()
        yield CounterMetricFamily(
            "warmgate_plan_cache_hits", "Plans served from the shared cache.", stats.hits
        )
        yield CounterMetricFamily(
            "warmgate_plan_cache_misses",
            "Plannings (each distinct planner input once, unless evicted and unpinned).",
            stats.misses,
        )
        yield CounterMetricFamily(
            "warmgate_plan_cache_evictions", "Plans evicted by the memory bound.", stats.evictions
        )
        yield GaugeMetricFamily("warmgate_plan_cache_entries", "Plans in the LRU.", stats.entries)
        yield GaugeMetricFamily(
            "warmgate_plan_cache_bytes", "Estimated memory of the plans in the LRU.", stats.bytes
        )


def serve_runtime(counters: ClientCounters, plans: PlanStats) -> None:
    """Export the API client's counters and the plan cache's on /metrics."""
    REGISTRY.register(ClientCollector(counters))
    REGISTRY.register(PlanCacheCollector(plans))
