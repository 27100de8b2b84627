"""Per-object retry delays after API failures: exponential, capped, honouring Retry-After."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Final

from warmgate.kube.cluster import ClusterError

BASE_S: Final = 2.0
CAP_S: Final = 300.0


class Backoff:
    """Consecutive failed syncs per object -> seconds to wait before the next try.

    2 s after the first failure, doubled per failure up to 5 minutes; a server's Retry-After
    (429, 503) is honoured when it asks for longer. A sync without failures resets the count.
    Thread-safe: kopf runs the handlers of different objects in threads.
    """

    def __init__(self, base_s: float = BASE_S, cap_s: float = CAP_S) -> None:
        self._base, self._cap = base_s, cap_s
        self._failures: dict[str, int] = {}
        self._lock = threading.Lock()

    def after(self, uid: str, errors: Sequence[ClusterError]) -> float | None:
        """Seconds to wait before retrying ``uid`` (None: the sync went through)."""
        with self._lock:
            if not errors:
                self._failures.pop(uid, None)
                return None
            count = self._failures.get(uid, 0) + 1
            self._failures[uid] = count
        delay = min(self._cap, self._base * 2.0 ** (count - 1))
        asked = max((e.retry_after or 0.0 for e in errors), default=0.0)
        return float(max(delay, min(asked, self._cap)))

    def forget(self, uid: str) -> None:
        """Drop the count of a deleted object."""
        with self._lock:
            self._failures.pop(uid, None)
