"""Status writes at the resourceVersion the sync read (issue 23 item 9): a status computed from
an older object never overwrites a newer writer's; a 409 means read again and decide again.

The fake cluster here refuses a status write whose precondition is not the object's current
version, as the apiserver does (the real answer is pinned by
tests/integration/test_kube_cluster.py); the sync and the followers' `StatusMemory` are real.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sync_world import LOG, World

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.kube.cluster import ClusterError
from warmgate.runtime.apply import StatusVersion
from warmgate.runtime.backoff import BASE_S
from warmgate.runtime.follower import StatusMemory
from warmgate.runtime.sync import Synced, sync


def _sync(world: World, version: str | None) -> Synced:
    """One sync of the world's object as read at ``version``; its status is the object's only
    when the server took it."""
    outcome = sync(world.sdd, world.runtime, world.events, LOG, at=world.now, version=version)
    if outcome.written:
        world.sdd = world.sdd.model_copy(update={"status": outcome.status})
    return outcome


class Versioned:
    """The object's resourceVersion, moved by every write (ours and another writer's)."""

    def __init__(self, world: World) -> None:
        self.current = "10"
        self.sent: list[str | None] = []
        self._next = itertools.count(11)
        self._patch = world.cluster.patch_status
        world.cluster.patch_status = self.patch_status  # type: ignore[method-assign]

    def another_writer(self) -> None:
        self.current = str(next(self._next))

    def patch_status(
        self, namespace: str, name: str, body: Any, resource_version: str | None = None
    ) -> str | None:
        self.sent.append(resource_version)
        if resource_version is not None and resource_version != self.current:
            raise ClusterError("the object has been modified", status=409)
        self._patch(namespace, name, body, resource_version)
        self.another_writer()
        return self.current


def test_a_status_write_after_a_newer_writer_is_refused_and_retried_from_a_new_read(
    caplog: pytest.LogCaptureFixture,
) -> None:
    world = World()
    versions = Versioned(world)
    read = versions.current
    versions.another_writer()  # a spec edit or another replica, after this sync's read
    caplog.set_level("INFO")
    stale = _sync(world, read)
    assert not stale.written
    assert stale.retry_after == BASE_S  # the backoff: the follower syncs again from a new read
    assert "the object changed since it was read" in caplog.text
    assert world.cluster.status_writes == []  # nothing of the stale status reached the object
    fresh = _sync(world, versions.current)
    assert fresh.written
    assert fresh.version == versions.current
    assert fresh.retry_after is None


def test_each_write_of_one_sync_is_preconditioned_on_the_previous_ones_answer() -> None:
    """The Planning notice, then the final status: the second at the notice's version."""
    world = World()
    versions = Versioned(world)
    read = versions.current
    outcome = _sync(world, read)
    assert len(versions.sent) == 2
    assert versions.sent[0] == read
    assert versions.sent[1] not in (None, read)
    assert outcome.version == versions.current
    assert read in outcome.replaced
    assert versions.sent[1] in outcome.replaced


def test_status_version_follows_only_known_answers() -> None:
    unconditional = StatusVersion()
    unconditional.wrote("7")
    assert (unconditional.current, unconditional.replaced) == (None, set())
    at = StatusVersion("5")
    at.wrote(None)  # an answer without a version: keep the precondition
    assert at.current == "5"
    at.wrote("6")
    at.wrote("8")
    assert (at.current, at.replaced) == ("8", {"5", "6"})


def test_the_memory_stands_in_only_for_a_body_its_write_replaced() -> None:
    world = World()
    memory = StatusMemory()
    written = SpecDecodeDeploymentStatus(phase="Warming")
    memory.remember("u", written, "12", frozenset({"10", "11"}))
    sdd = world.sdd.model_copy(
        update={"metadata": world.sdd.metadata.model_copy(update={"uid": "u"})}
    )
    echo, version = memory.latest(sdd, "10")  # the watch has not brought the write back
    assert echo.status == written
    assert version == "12"
    newer, version = memory.latest(sdd, "13")  # another writer's version: news, taken as is
    assert newer.status == sdd.status
    assert version == "13"
    again, version = memory.latest(sdd, "10")  # the memory was dropped with the news
    assert again.status == sdd.status
    assert version == "10"
