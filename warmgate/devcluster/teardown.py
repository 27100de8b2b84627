"""Leave the machine as it was: no Pod process, shim, mount, namespace, cgroup or bridge left.

One routine serves three callers: a normal stop, the reaper after a killed test run, and the
next start (a run whose reaper was killed too). It needs no running containerd: Pod processes
are found through their cgroups (the kubelet puts every Pod below ``CGROUP_PARENT``), shims
through their command line (they name the cluster's containerd socket).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from warmgate.devcluster import network
from warmgate.devcluster.layout import CGROUP_PARENT, Paths

CGROUP_FS = Path("/sys/fs/cgroup")
_MNT_DETACH = 2


def cgroup_dirs() -> list[Path]:
    """``CGROUP_PARENT`` in every mounted hierarchy (cgroup v1 controllers and the unified)."""
    if not CGROUP_FS.is_dir():
        return []
    return [h / CGROUP_PARENT for h in sorted(CGROUP_FS.iterdir()) if (h / CGROUP_PARENT).is_dir()]


def _walk_bottom_up(top: Path) -> Iterator[Path]:
    for folder, _dirs, _files in os.walk(top, topdown=False):
        yield Path(folder)


def _pids_in_cgroups() -> set[int]:
    pids: set[int] = set()
    for top in cgroup_dirs():
        for folder in _walk_bottom_up(top):
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (folder / "cgroup.procs").read_text().split())
    return pids


def _cmdlines() -> Iterator[tuple[int, str]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                raw = (entry / "cmdline").read_bytes()
                yield int(entry.name), raw.replace(b"\0", b" ").decode(errors="replace")


def _kill(pids: set[int]) -> None:
    for pid in pids - {os.getpid()}:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def kill_processes(paths: Paths, timeout: float = 20.0) -> None:
    """SIGKILL every process of the cluster's Pods, its shims and daemons until none is left."""
    root = str(paths.root)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = _pids_in_cgroups() | {pid for pid, cmd in _cmdlines() if root in cmd}
        if not found - {os.getpid()}:
            return
        _kill(found)
        time.sleep(0.2)
    raise RuntimeError(f"processes of the dev cluster survived SIGKILL: {sorted(found)}")


def _mount_points(under: Path) -> list[Path]:
    prefix = str(under).rstrip("/") + "/"
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point.startswith(prefix) or point == str(under):
            points.append(Path(point))
    return sorted(points, key=lambda p: len(p.parts), reverse=True)


def unmount_all(under: Path) -> None:
    """Detach every mount below ``under`` (volumes, rootfs, shm, network namespaces)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for _ in range(5):
        points = _mount_points(under)
        if not points:
            return
        for point in points:
            libc.umount2(str(point).encode(), _MNT_DETACH)
    raise RuntimeError(f"mounts left below {under}: {_mount_points(under)}")


def remove_cgroups() -> None:
    """rmdir the Pod cgroups, deepest first (they must be empty: ``kill_processes`` ran)."""
    for top in cgroup_dirs():
        for folder in _walk_bottom_up(top):
            with contextlib.suppress(OSError):
                folder.rmdir()


def remove_tree(path: Path) -> None:
    """rm -rf ``path``, only once nothing is mounted below it (never into a bind mount)."""
    if _mount_points(path):
        raise RuntimeError(f"refusing to delete {path}: mounts below it")
    shutil.rmtree(path, ignore_errors=True)


def purge_containerd(ctr: list[str]) -> None:
    """Delete the k8s.io namespace's tasks and containers (a killed run's leftovers)."""
    listed = subprocess.run(
        [*ctr, "containers", "list", "-q"], capture_output=True, text=True, check=False
    )
    for cid in listed.stdout.split():
        subprocess.run([*ctr, "tasks", "delete", "-f", cid], capture_output=True, check=False)
        subprocess.run([*ctr, "containers", "delete", cid], capture_output=True, check=False)


def tear_down(paths: Paths, log: Callable[[str], None]) -> None:
    """Everything, in order; safe to run again and on a half-started cluster."""
    steps: list[tuple[str, Callable[[], None]]] = [
        ("killed the Pods, shims and node daemons", lambda: kill_processes(paths)),
        (
            "unmounted volumes, root filesystems and network namespaces",
            lambda: unmount_all(paths.root),
        ),
        ("removed the Pod cgroups", remove_cgroups),
        ("removed the bridge, nft tables and routes", lambda: network.tear_down(paths)),
        ("removed the runtime state", lambda: remove_tree(paths.root)),
    ]
    failures = []
    for done, step in steps:
        try:
            step()
            log(done)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            failures.append(f"{done.split(' ', 1)[1]}: {exc}")
    if failures:
        raise RuntimeError("dev cluster teardown incomplete: " + "; ".join(failures))


def leftovers(paths: Paths) -> list[str]:
    """What a killed run left on the machine (empty when it is clean)."""
    found = []
    if paths.root.exists():
        found.append(str(paths.root))
    if network.bridge_exists():
        found.append("bridge")
    if cgroup_dirs():
        found.append("cgroups")
    return found
