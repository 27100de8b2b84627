"""High availability with kopf peering: the replicas share a peering object; one of them acts.

kopf's peering is the framework's way to run several replicas (kopf docs, "Peering"): each
replica writes a keep-alive into a `KopfPeering` (namespaced) or `ClusterKopfPeering` object
every `lifetime - 5..10` seconds, and a replica that sees a live peer of higher priority pauses:
it closes its watches and stops its daemons, so it neither reads nor writes anything else.

- Priority: the older replica wins (its start time, negated, in milliseconds plus a random
  tiebreak), so a new pod (rollout, rescheduling) waits as the standby instead of taking over.
  Equal priorities would pause both replicas, so they are made unique.
- Failover: a replica stopped gracefully removes its keep-alive, and the standby resumes at
  once; a replica that died (SIGKILL, node loss) is presumed dead `lifetime` seconds after its
  last keep-alive.
- Start: with a named peering kopf starts paused until it has read the peering object, so a new
  replica never acts before it knows whether another one is active.
- The followers (one task for all objects, `handlers.follower`) are no kopf daemons, so kopf
  cannot stop them: `follow_activity` reads the peering objects every
  `ACTIVITY_CHECK_SECONDS` and pauses them (forgetting every object) while a live peer of
  higher priority is in them, kopf's own rule. A standby follows nothing anyway: its paused
  watch delivers no object to follow.

The peering objects are created here, before kopf starts (kopf pauses forever without one).
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Callable, Collection, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol, cast

import kopf
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from warmgate.settings import Settings

PEERING_GROUP: Final = "kopf.dev"
PEERING_VERSION: Final = "v1"
HTTP_NOT_FOUND: Final = 404
HTTP_FORBIDDEN: Final = 403
HTTP_CONFLICT: Final = 409
# Seconds between two reads of the peering objects by the followers' activity check.
ACTIVITY_CHECK_SECONDS: Final = 5.0

log = logging.getLogger(__name__)


class PeeringError(RuntimeError):
    """The peering objects cannot be created: a missing CRD or missing rights, named."""


def priority(started: float) -> int:
    """Higher for older replicas; unique with overwhelming probability.

    Milliseconds times 1000 plus a random tiebreak: about 1.8e15, exact in int64 and in the
    float64 a JSON reader may turn it into (below 2**53).
    """
    return -(int(started * 1000) * 1000 + random.randrange(1000))


def configure(settings: kopf.OperatorSettings, ours: Settings, started: float) -> None:
    """Peering settings of kopf: mandatory, quiet keep-alives, our lifetime and priority."""
    if ours.peering is None:
        settings.peering.standalone = True
        return
    settings.peering.standalone = False
    settings.peering.mandatory = True
    settings.peering.name = ours.peering
    settings.peering.priority = priority(started)
    settings.peering.lifetime = ours.peering_lifetime
    settings.peering.stealth = True  # a keep-alive every few seconds is no news


def ensure_objects(api: client.ApiClient, name: str, namespaces: Collection[str]) -> None:
    """Create the peering object (one per watched namespace, or one cluster-wide) if missing."""
    custom = client.CustomObjectsApi(api)
    if not namespaces:
        body = _body("ClusterKopfPeering", name)
        _create(name, custom.create_cluster_custom_object, "clusterkopfpeerings", body)
    for namespace in namespaces:
        body = _body("KopfPeering", name)
        create = custom.create_namespaced_custom_object
        _create(name, create, namespace, "kopfpeerings", body)


def _create(name: str, create: Callable[..., Any], *args: Any) -> None:
    """One peering object; one that exists already is fine (the other replica made it)."""
    try:
        create(PEERING_GROUP, PEERING_VERSION, *args)
    except ApiException as exc:
        if exc.status != HTTP_CONFLICT:
            raise PeeringError(_explain(exc, name)) from exc


def _body(kind: str, name: str) -> dict[str, object]:
    return {
        "apiVersion": f"{PEERING_GROUP}/{PEERING_VERSION}",
        "kind": kind,
        "metadata": {"name": name},
    }


def _explain(exc: ApiException, name: str) -> str:
    if exc.status == HTTP_NOT_FOUND:
        return (
            f"peering {name!r}: the kopf peering CRDs (kopf.dev) are not installed; install the "
            "chart with crds.install=true or apply crds/kopf.dev_peerings.yaml"
        )
    if exc.status == HTTP_FORBIDDEN:
        return f"peering {name!r}: the operator may not create kopf.dev peering objects (RBAC)"
    return f"peering {name!r}: could not create the peering object: {exc.status} {exc.reason}"


class Pausable(Protocol):
    def pause(self) -> None: ...

    def resume(self) -> None: ...

    async def next_check(self, seconds: float) -> None: ...


def outranked(peering: Mapping[str, Any], priority: int, now: datetime) -> bool:
    """Whether the peering object's status holds a live peer of higher priority than ours
    (kopf's rule: that peer acts and this replica pauses)."""
    for peer in (peering.get("status") or {}).values():
        if not isinstance(peer, Mapping) or int(peer.get("priority") or 0) <= priority:
            continue
        try:
            seen = datetime.fromisoformat(str(peer.get("lastseen")))
        except ValueError:
            continue
        if seen.tzinfo is None:
            seen = seen.replace(tzinfo=UTC)
        if seen + timedelta(seconds=int(peer.get("lifetime") or 60)) > now:
            return True
    return False


async def follow_activity(
    api: client.ApiClient,
    name: str,
    priority: int,
    namespaces: Collection[str],
    followers: Pausable,
) -> None:
    """Pause the followers while another replica acts, resume them when none does."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            peerings = await loop.run_in_executor(None, _read, api, name, namespaces)
        except ApiException as exc:  # keep the last state; kopf's own watch decides anyway
            log.warning(f"Could not read the peering {name!r}: {exc.status} {exc.reason}")
        else:
            now = datetime.now(UTC)
            if any(outranked(peering, priority, now) for peering in peerings):
                followers.pause()
            else:
                followers.resume()
        await followers.next_check(ACTIVITY_CHECK_SECONDS)


def _read(api: client.ApiClient, name: str, namespaces: Collection[str]) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    if not namespaces:
        plural = "clusterkopfpeerings"
        found = custom.get_cluster_custom_object(PEERING_GROUP, PEERING_VERSION, plural, name)
        return [cast(dict[str, Any], found)]
    get = custom.get_namespaced_custom_object
    return [
        cast(dict[str, Any], get(PEERING_GROUP, PEERING_VERSION, ns, "kopfpeerings", name))
        for ns in namespaces
    ]
