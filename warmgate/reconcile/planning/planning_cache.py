"""Planning results shared by every object with the same planner inputs, bounded by memory.

A result is keyed by the digest of what the planner reads (`planning.PlanningInputs`: the engine
shape config, the coverage policy, the model size, the warmup timeout), so N objects with one
config plan once. Results live in an LRU bounded by their estimated size in bytes. Each object
also pins the result it last used, so a resync never re-plans an unchanged object even after
the LRU evicted its result; an evicted result still pinned by one object is found by the
others through a weak map.
"""

from __future__ import annotations

import hashlib
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning.evaluate import PlanningInputs, PlanningResult

Planner = Callable[[SpecDecodeDeployment], PlanningResult]
DEFAULT_MAX_BYTES: Final = 64 * 2**20
# The size walk stops here: a result is thousands of objects, never millions.
MAX_WALK: Final = 1_000_000
_LEAVES: Final[frozenset[type]] = frozenset({str, bytes, int, float, bool, type(None), complex})
_LEAF_CLASSES: Final[tuple[type, ...]] = tuple(_LEAVES)
_SEQUENCES: Final = frozenset({list, tuple, set, frozenset})


def plan_key(sdd: SpecDecodeDeployment) -> str:
    """The digest of the planner's inputs; a spec without readable inputs: its whole spec."""
    try:
        return PlanningInputs.of(sdd).digest
    except ValueError:  # pydantic's ValidationError too: evaluate reports it as InvalidSpec
        return "spec:" + hashlib.sha256(sdd.spec.model_dump_json().encode()).hexdigest()


def deep_size(obj: object) -> int:
    """Bytes of ``obj`` and everything it references (each object counted once)."""
    seen: set[int] = set()
    stack: list[Any] = [obj]
    total = 0
    size_of = sys.getsizeof
    while stack and len(seen) < MAX_WALK:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        total += size_of(item)
        kind = type(item)  # exact types first: the most frequent, and no isinstance walk
        if kind in _LEAVES:
            continue
        if kind is dict:
            stack.extend(item)
            stack.extend(item.values())
        elif kind in _SEQUENCES:
            stack.extend(item)
        elif not isinstance(item, _LEAF_CLASSES):  # a str enum is a leaf too
            stack.extend(_referents(item))
    return total


def _referents(item: Any) -> list[Any]:
    if isinstance(item, dict):
        return [*item.keys(), *item.values()]
    if isinstance(item, list | tuple | set | frozenset):
        return list(item)
    found = list(vars(item).values()) if hasattr(item, "__dict__") else []
    found.extend(getattr(item, slot) for slot in _slots(type(item)) if hasattr(item, slot))
    return found


def _slots(kind: type) -> tuple[str, ...]:
    """The slot names of a class and its bases (found once per class)."""
    found = _SLOTS.get(kind)
    if found is None:
        found = tuple(slot for klass in kind.__mro__ for slot in getattr(klass, "__slots__", ()))
        _SLOTS[kind] = found
    return found


_SLOTS: dict[type, tuple[str, ...]] = {}


@dataclass(frozen=True)
class CacheStats:
    """Counters and sizes of a PlanningCache, for the metrics."""

    hits: int
    misses: int
    evictions: int
    entries: int
    bytes: int
    pinned: int


class _Flight:
    """One planning in progress; objects with the same key wait for it instead of planning."""

    def __init__(self) -> None:
        self.done = threading.Event()


class PlanningCache:
    """Planning results by the digest of the planner's inputs (an LRU of ``max_bytes``).

    Thread-safe: kopf syncs different objects in parallel threads. Two objects with the same
    inputs asking at once plan once (the second waits for the first).
    """

    def __init__(
        self,
        planner: Planner,
        max_bytes: int = DEFAULT_MAX_BYTES,
        size_of: Callable[[object], int] = deep_size,
    ) -> None:
        self._planner, self._max_bytes, self._size_of = planner, max_bytes, size_of
        self._lru: OrderedDict[str, tuple[PlanningResult, int]] = OrderedDict()
        self._alive: weakref.WeakValueDictionary[str, PlanningResult] = (
            weakref.WeakValueDictionary()
        )
        self._pins: dict[str, tuple[str, PlanningResult]] = {}
        self._flights: dict[str, _Flight] = {}
        self._bytes = self._hits = self._misses = self._evictions = 0
        self._lock = threading.Lock()

    def get(self, sdd: SpecDecodeDeployment) -> PlanningResult:
        """The planning result of ``sdd``'s inputs: planned on the first ask, shared after."""
        key, uid = plan_key(sdd), sdd.metadata.uid or ""
        while True:
            with self._lock:
                known = self._lookup(key, uid)
                if known is not None:
                    self._hits += 1
                    return self._pin(uid, key, known)
                flight = self._flights.get(key)
                leading = flight is None
                if flight is None:
                    flight = self._flights[key] = _Flight()
            if leading:
                return self._plan(sdd, key, uid, flight)
            flight.done.wait()  # then found above, unless that planning raised

    def known(self, sdd: SpecDecodeDeployment) -> bool:
        """Whether ``sdd``'s result is at hand, so `get` returns without planning (not counted
        as a hit, nothing pinned)."""
        with self._lock:
            return self._peek(plan_key(sdd), sdd.metadata.uid or "") is not None

    def forget(self, uid: str) -> None:
        """The object is gone: drop its pin."""
        with self._lock:
            self._pins.pop(uid, None)

    def stats(self) -> CacheStats:
        with self._lock:
            entries, pinned = len(self._lru), len(self._pins)
            return CacheStats(
                self._hits, self._misses, self._evictions, entries, self._bytes, pinned
            )

    def _lookup(self, key: str, uid: str) -> PlanningResult | None:
        if key in self._lru:
            self._lru.move_to_end(key)
        return self._peek(key, uid)

    def _peek(self, key: str, uid: str) -> PlanningResult | None:
        if key in self._lru:
            return self._lru[key][0]
        pinned = self._pins.get(uid)
        if pinned is not None and pinned[0] == key:
            return pinned[1]
        return self._alive.get(key)

    def _pin(self, uid: str, key: str, result: PlanningResult) -> PlanningResult:
        if uid:
            self._pins[uid] = (key, result)
        return result

    def _plan(
        self, sdd: SpecDecodeDeployment, key: str, uid: str, flight: _Flight
    ) -> PlanningResult:
        try:
            result = self._planner(sdd)
            size = self._size_of(result)
            with self._lock:
                self._misses += 1
                self._store(key, result, size)
                return self._pin(uid, key, result)
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()

    def _store(self, key: str, result: PlanningResult, size: int) -> None:
        self._lru[key] = (result, size)
        self._alive[key] = result
        self._bytes += size
        while self._bytes > self._max_bytes and len(self._lru) > 1:
            _, (_, dropped) = self._lru.popitem(last=False)
            self._bytes -= dropped
            self._evictions += 1
