"""The followers' activity check reads a peering object as kopf does: a live peer of higher
priority acts, this replica pauses."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from warmgate.handlers.peering import outranked

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def peering(**peers: tuple[int, timedelta, int]) -> dict[str, Any]:
    """Peers by id: (priority, how long ago last seen, lifetime in seconds), as kopf writes."""
    status = {
        peer: {"priority": prio, "lastseen": (NOW - ago).isoformat(), "lifetime": life}
        for peer, (prio, ago, life) in peers.items()
    }
    return {"metadata": {"name": "warmgate"}, "status": status}


def test_a_live_peer_of_higher_priority_outranks_us() -> None:
    assert outranked(peering(old=(-100, timedelta(seconds=5), 60)), -200, NOW)


def test_a_dead_or_lower_peer_and_ourselves_do_not() -> None:
    body = peering(
        dead=(-100, timedelta(seconds=61), 60),  # its keep-alive lapsed
        young=(-300, timedelta(seconds=1), 60),
        us=(-200, timedelta(seconds=1), 60),
    )
    assert not outranked(body, -200, NOW)
    assert not outranked({"metadata": {}}, -200, NOW)  # nobody yet


def test_kopfs_own_timestamps_without_a_zone_are_utc() -> None:
    naive = (NOW - timedelta(seconds=5)).replace(tzinfo=None).isoformat()
    body = {"status": {"old": {"priority": 5, "lastseen": naive, "lifetime": 60}}}
    assert outranked(body, 1, NOW)
