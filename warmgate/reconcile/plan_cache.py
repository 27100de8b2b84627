"""Planning results kept per object generation, so a resync never plans a spec twice."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable

from warmgate.api import SpecDecodeDeployment
from warmgate.reconcile.planning import PlanningResult

Planner = Callable[[SpecDecodeDeployment], PlanningResult]


class PlanCache:
    """The last ``size`` planning results, keyed by (uid, generation).

    Planning costs up to ~2 s per object; the resync must not pay it again for a spec it has
    already planned. Any spec change bumps the generation, so a key never goes stale.
    """

    def __init__(self, planner: Planner, size: int = 256) -> None:
        self._planner = planner
        self._size = size
        self._results: OrderedDict[tuple[str, int], PlanningResult] = OrderedDict()
        self._lock = threading.Lock()  # kopf runs the handlers of different objects in threads

    def get(self, sdd: SpecDecodeDeployment) -> PlanningResult:
        """The planning result of this generation of ``sdd``, planned on the first call."""
        key = (sdd.metadata.uid or "", sdd.metadata.generation or 0)
        with self._lock:
            known = self._results.get(key)
        if known is not None:
            return known
        result = self._planner(sdd)
        with self._lock:
            self._results[key] = result
            while len(self._results) > self._size:
                self._results.popitem(last=False)
        return result
