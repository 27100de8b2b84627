"""A memory probe for the operator process, loaded by bench_operator_memory.py (not shipped).

Python imports `sitecustomize` at start-up from the path; the benchmark puts this directory on
the operator's PYTHONPATH with $MEMPROBE_OUT set. On SIGUSR1 the process appends a report to
that file: its RSS, a census of the garbage-collected objects by type, and, from the second
signal on when $MEMPROBE_TRACE is set, tracemalloc's live allocations by file and line (tracing
starts at the first signal, after the imports, so it sees what the objects cost). The report
ends with the RSS after gc.collect() and malloc_trim(0) (memory the heap held but did not use).
"""

import contextlib
import ctypes
import gc
import os
import signal
import sys
import tracemalloc
from collections import Counter

OUT = os.environ.get("MEMPROBE_OUT")
TRACE_FRAMES = int(os.environ.get("MEMPROBE_TRACE") or 0)
END = "-- end"


def _status() -> str:
    with open("/proc/self/status") as status:
        fields = [line.split() for line in status if line.startswith(("VmRSS", "VmHWM"))]
    return ", ".join(f"{f[0]} {int(f[1]) / 1024:.1f} MB" for f in fields)


def _census(lines: list[str]) -> None:
    counts: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    for obj in gc.get_objects():
        kind = f"{type(obj).__module__}.{type(obj).__qualname__}"
        counts[kind] += 1
        with contextlib.suppress(TypeError):
            sizes[kind] += sys.getsizeof(obj)
    lines.append("-- objects by type (shallow KB, count), top 40")
    lines.extend(f"{size / 1024:9.0f} {counts[k]:9d} {k}" for k, size in sizes.most_common(40))


def _traced(lines: list[str]) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    for key, top in (("filename", 30), ("lineno", 50)):
        lines.append(f"-- traced allocations by {key} (MB, blocks), top {top}")
        for stat in snapshot.statistics(key)[:top]:
            frame = stat.traceback[0]
            where = frame.filename if key == "filename" else f"{frame.filename}:{frame.lineno}"
            lines.append(f"{stat.size / 2**20:8.2f} {stat.count:9d} {where}")


def _report(signum: int, frame: object) -> None:
    lines = [f"== {_status()}"]
    _census(lines)
    if tracemalloc.is_tracing():
        _traced(lines)
    elif TRACE_FRAMES:
        tracemalloc.start(TRACE_FRAMES)
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    lines.append(f"-- after gc.collect() and malloc_trim(0): {_status()}")
    lines.append(END)
    with open(str(OUT), "a") as out:
        out.write("\n".join(lines) + "\n")


if OUT:
    signal.signal(signal.SIGUSR1, _report)
