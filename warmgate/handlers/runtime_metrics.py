"""Metrics of the operator's own work: its one API client and its shared plan cache (issue 14).

They are read when /metrics is scraped (a custom collector), not counted on every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import REGISTRY
from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

# (connections opened, requests sent) by the API client so far.
ClientCounters = Callable[[], tuple[int, int]]


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


def serve_client(counters: ClientCounters) -> None:
    """Export the API client's counters on /metrics."""
    REGISTRY.register(ClientCollector(counters))
