#!/usr/bin/env python3
"""Where a run's CPU goes, by command: the kernel's process accounting (acct(2), BSD v3 records).

Every process that ends while accounting is on leaves a record: its command name, its own user
and system CPU (all its threads), when it began. Short-lived ones count too (a kubectl, a Go
`compile`), and so do the node's Pods (the records reach the machine's file from every PID
namespace). A process still running when accounting stops leaves none. Root only, and a kernel
with CONFIG_BSD_PROCESS_ACCT (docs/testing.md, "After `make run`, by process").

    sudo hack/cpu-accounting.py on /tmp/run.acct      # then run what is to be measured
    sudo hack/cpu-accounting.py off
    hack/cpu-accounting.py report /tmp/run.acct [--since 'YYYY-MM-DD HH:MM:SS' (UTC)] [--top 30]

The report prints the CPU of every command name with its process count, the largest first. A
process's name is the one its last thread had when it ended (vLLM's engines end as
``VLLM::Worker``, ``ZMQbg/Reaper`` or ``pt_gloo_runloop``: add those up).
"""

from __future__ import annotations

import argparse
import collections
import ctypes
import datetime
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

# struct acct_v3 (linux/acct.h): flag, version, tty, exitcode, uid, gid, pid, ppid, btime,
# etime (float), then 8 comp_t (utime, stime, mem, io, rw, minflt, majflt, swaps), comm[16]
_V3 = struct.Struct("<BBHIIIIIIf8H16s")
_AHZ = 100  # the records' clock ticks per second


@dataclass(frozen=True)
class Record:
    began: int  # unix time
    cpu: float  # s, user + system
    comm: str


def _comp(value: int) -> int:
    """comp_t: a 13-bit mantissa and a 3-bit base-8 exponent."""
    return (value & 0x1FFF) << (3 * ((value >> 13) & 7))


def records(path: Path) -> Iterator[Record]:
    data = path.read_bytes()
    for offset in range(0, len(data) - _V3.size + 1, _V3.size):
        f = _V3.unpack_from(data, offset)
        if f[1] != 3:
            raise ValueError(f"{path}: record {offset // _V3.size} is not a v3 record")
        cpu = (_comp(f[10]) + _comp(f[11])) / _AHZ
        comm = f[18].split(b"\0")[0].decode(errors="replace")
        yield Record(began=f[8], cpu=cpu, comm=comm)


def _acct(path: str | None) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.acct(path.encode() if path else None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"acct({path!r}) failed (root and CONFIG_BSD_PROCESS_ACCT needed)")


def report(path: Path, since: str | None, top: int) -> None:
    start = 0.0
    if since:
        start = datetime.datetime.fromisoformat(since).replace(tzinfo=datetime.UTC).timestamp()
    cpu: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for rec in records(path):
        if rec.began >= start:
            cpu[rec.comm] += rec.cpu
            count[rec.comm] += 1
    total, processes = sum(cpu.values()), sum(count.values())
    print(f"{processes} processes, {total:.0f} s of CPU ({total / 120:.1f} min of 2 cores)")
    for comm, seconds in cpu.most_common(top):
        print(f"{seconds:8.0f} s  {count[comm]:6d}  {comm}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("on").add_argument("file")
    sub.add_parser("off")
    rep = sub.add_parser("report")
    rep.add_argument("file", type=Path)
    rep.add_argument("--since", help="only processes started from then on (UTC)")
    rep.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    if args.what == "on":
        Path(args.file).touch()
        _acct(args.file)
    elif args.what == "off":
        _acct(None)
    else:
        report(args.file, args.since, args.top)


if __name__ == "__main__":
    main()
