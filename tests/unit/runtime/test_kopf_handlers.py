"""The kopf layer's part of issue 11 (item 13 and the retry of item 3), without a cluster.

The integration tier (test_operator_lifecycle.py) proves the same on the real API server: no
finalizer on the object (an old one removed), the series gone after a delete.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import pytest
from prometheus_client import generate_latest
from support.fake_cluster import FakeCluster
from support.paths import DOCS

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.api.constants import FINALIZER
from warmgate.reconcile.planning.planning_cache import PlanningCache
from warmgate.runtime import kopf_handlers, metrics
from warmgate.runtime.follower import Operator
from warmgate.runtime.kopf_handlers import kopf_settings, registry
from warmgate.settings import Settings

LOG = logging.getLogger("test_lifecycle_handlers")


def test_the_finalizer_kopf_removes_is_the_documented_one_of_older_operators() -> None:
    assert kopf_settings().persistence.finalizer == FINALIZER
    assert f"`{FINALIZER}`" in (DOCS / "api.md").read_text(encoding="utf-8")
    operator_doc = (DOCS / "operator.md").read_text(encoding="utf-8")
    assert f"`{FINALIZER}`" in operator_doc
    assert '"path": "/metadata/finalizers"' in operator_doc  # how to remove it by hand


def test_no_handler_needs_a_finalizer_or_a_task_per_object() -> None:
    handlers = registry(Settings())
    assert handlers._spawning.get_all_handlers() == []  # no daemons, no timers
    # No change handlers either: kopf writes nothing to the objects (the followers sync).
    assert handlers._changing.get_all_handlers() == []
    # So kopf keeps no diff base: no copy of each watched body on every watch event.
    storage = kopf_settings().persistence.diffbase_storage
    body = kopf.Body({"metadata": {"name": "x", "labels": {"a": "b"}}, "spec": {"k": 1}})
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None


def test_a_deleted_objects_series_are_removed() -> None:
    from support.examples import example_sdd

    from warmgate.reconcile.planning.evaluate import evaluate

    sdd = example_sdd("llama31-8b-seeds", namespace="ns-gone", name="gone")
    metrics.record("ns-gone", "gone", evaluate(sdd))
    metrics.record_status("ns-gone", "gone", SpecDecodeDeploymentStatus())  # every gauge

    def series() -> list[str]:
        text = generate_latest(metrics.REGISTRY).decode()
        return [line for line in text.splitlines() if 'namespace="ns-gone"' in line]

    assert series()
    plans = PlanningCache(evaluate)
    plans.get(sdd.model_copy(update={"metadata": sdd.metadata.model_copy(update={"uid": "u"})}))
    runtime = Operator(Settings(), FakeCluster(), plans)
    body = {"metadata": {"namespace": "ns-gone", "name": "gone", "uid": "u"}}
    assert plans.stats().pinned == 1
    kopf_handlers.forget(body, runtime)
    assert series() == []
    assert plans.stats().pinned == 0  # its plan pin went too


def test_an_api_failure_is_retried_after_the_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sync's backoff reaches the follower as the outcome's delay (the sync wrote the
    status itself); an unreadable spec is reported once per generation, not on every sync."""
    from support.examples import example_sdd

    from warmgate.runtime.sync import Synced

    outcome = Synced(result=None, status=None, status_patch={"phase": "Ready"}, retry_after=4.0)  # type: ignore[arg-type]
    monkeypatch.setattr(kopf_handlers, "sync", lambda *a, **k: outcome)
    monkeypatch.setattr(kopf_handlers.metrics, "record", lambda *a: None)
    monkeypatch.setattr(kopf_handlers.metrics, "record_status", lambda *a: None)
    cluster = FakeCluster()
    memo = Operator(Settings(), cluster, PlanningCache(lambda _: outcome.result))
    sdd = example_sdd("llama31-8b-seeds", namespace="n", name="x", uid="u")
    body = sdd.model_dump(by_alias=True, exclude_none=True, mode="json")
    done = kopf_handlers.resync(body, LOG, memo)
    assert done is not None
    assert done.retry_after == 4.0
    warned: list[str] = []
    monkeypatch.setattr(kopf, "warn", lambda *a, **k: warned.append(k["reason"]))
    body["spec"]["engine"]["maxNumSeqs"] = "many"  # a CRD newer than the operator
    assert kopf_handlers.resync(body, LOG, memo) is None
    assert kopf_handlers.resync(body, LOG, memo) is None
    assert warned == ["InvalidSpec"]
    body["metadata"]["generation"] = 7
    assert kopf_handlers.resync(body, LOG, memo) is None
    assert warned == ["InvalidSpec", "InvalidSpec"]


def test_the_followed_body_loses_its_managed_fields_and_nothing_else() -> None:
    managed = [{"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:spec": {}}}]
    meta = {"name": "a", "uid": "u1", "annotations": {"x": "y"}, "managedFields": managed}
    event: Any = {"type": "MODIFIED", "object": {"metadata": meta, "spec": {"k": 1}}}
    memo = Operator(Settings(), FakeCluster(), PlanningCache(lambda _: None))  # type: ignore[arg-type,return-value]

    async def observe() -> None:
        await kopf_handlers.observe(event=event, type="MODIFIED", memo=memo)

    asyncio.run(observe())
    assert event["object"] == {
        "metadata": {"name": "a", "uid": "u1", "annotations": {"x": "y"}},
        "spec": {"k": 1},
    }
    assert len(memo.followers) == 1
    watching = registry(Settings())._watching.get_all_handlers()
    assert "observe" in [h.id for h in watching]


def test_a_deleted_event_stops_following_and_forgets_the_object() -> None:
    memo = Operator(Settings(), FakeCluster(), PlanningCache(lambda _: None))  # type: ignore[arg-type,return-value]
    body = {"metadata": {"namespace": "ns-del", "name": "d", "uid": "u-del"}}

    async def events() -> None:
        await kopf_handlers.observe(event={"object": body}, type=None, memo=memo)
        assert len(memo.followers) == 1
        await kopf_handlers.observe(event={"object": body}, type="DELETED", memo=memo)

    asyncio.run(events())
    assert len(memo.followers) == 0
    assert "u-del" in memo.gone


def test_a_sync_after_the_delete_brings_no_series_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follower's sync that waited for the object's lock while `forget` ran does nothing."""
    monkeypatch.setattr(kopf_handlers._KopfEvents, "post", lambda *_: None)  # no kopf context
    from support.examples import example_sdd

    from warmgate.reconcile.planning.evaluate import evaluate

    sdd = example_sdd("llama31-8b-seeds", namespace="ns-late", name="late", uid="late-uid")
    runtime = Operator(
        Settings(operator_image="warmgate:test"), FakeCluster(), PlanningCache(evaluate)
    )
    body = sdd.model_dump(by_alias=True, exclude_none=True, mode="json")
    assert kopf_handlers.resync(body, LOG, runtime) is not None
    assert 'namespace="ns-late"' in generate_latest(metrics.REGISTRY).decode()
    kopf_handlers.forget(body, runtime)
    assert kopf_handlers.resync(body, LOG, runtime) is None
    text = generate_latest(metrics.REGISTRY).decode()
    assert 'namespace="ns-late"' not in text


def test_the_watch_handlers_successes_are_not_logged() -> None:
    """kopf logs each watch handler's success at INFO, after every event: dropped. Failures and
    the operator's own messages stay."""
    watching = registry(Settings())._watching.get_all_handlers()
    assert {h.id for h in watching} == {"observe", "child"}

    def kept(level: int, message: str) -> bool:
        record = logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)
        return kopf_handlers.quiet_watch_handlers(record)

    for handler in watching:
        assert not kept(logging.INFO, f"{handler} succeeded.")
        assert kept(logging.ERROR, f"{handler} failed with an exception. Will ignore.")
    assert kept(logging.INFO, "Planned SpecDecodeDeployment abc: all reachable states covered")
