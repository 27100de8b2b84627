"""Gives the C heap's free memory back to the system after a planning's burst of garbage.

A planning builds and drops hundreds of thousands of objects in a sync thread; glibc keeps the
freed memory of the two arenas (`cli.operator.limit_malloc_arenas`) mapped for reuse, so the
operator's resident memory grew with every planning that ran while others were still alive.
`malloc_trim(0)` returns the free pages; it takes a few milliseconds, against the 5-300 ms of a
planning, and is only called after one (a resync that finds its plan in the cache does not).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import cache


@cache
def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_free_memory() -> bool:
    """Return the C heap's free pages to the system; False where the C library is not glibc."""
    libc = _libc()
    return bool(libc.malloc_trim(0)) if libc is not None else False


__all__ = ["release_free_memory"]
