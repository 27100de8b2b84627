"""Atomic publication of the HPU recipe cache to the shared volume, and its checked restore."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from warmgate.warmup.plan import KEY_RE

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
# Temporary folders sit beside the final one (same volume, so rename is atomic) and carry a
# prefix no cache key can have: readers only ever look at <volume>/<key>/manifest.json.
TMP_PREFIX = ".warmgate-tmp-"
_BUF = 1024 * 1024


@dataclass
class PublishResult:
    """``status`` is "published", "exists" (a complete entry was already there) or "blocked"."""

    status: str
    path: Path
    files: int = 0
    total_bytes: int = 0
    detail: str = ""


@dataclass
class RestoreResult:
    """A verified copy of a published entry on local disk."""

    manifest: dict[str, Any]
    files: int
    total_bytes: int
    problems: list[str] = field(default_factory=list)


def _check_key(key: str) -> None:
    if not KEY_RE.match(key):
        raise ValueError(f"invalid cache key {key!r}")


def _copy_with_digest(src: Path, dst: Path) -> tuple[int, str]:
    """Copy one file, fsync it, and return its size and sha256."""
    digest = hashlib.sha256()
    size = 0
    with src.open("rb") as fin, dst.open("wb") as fout:
        while block := fin.read(_BUF):
            digest.update(block)
            fout.write(block)
            size += len(block)
        fout.flush()
        os.fsync(fout.fileno())
    return size, digest.hexdigest()


def _regular_files(root: Path) -> list[Path]:
    """Regular files under root, sorted; symlinks are skipped so nothing outside is copied."""
    found = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink()]
    return sorted(found, key=lambda p: p.relative_to(root).as_posix())


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json(path: Path, data: dict[str, Any]) -> None:
    """Write JSON through a temporary name and rename, so the file is whole or absent."""
    tmp = path.with_name(path.name + ".partial")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    with tmp.open("rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def find_published(volume_dir: Path, key: str) -> dict[str, Any] | None:
    """The manifest of a complete entry, or None: a folder without a manifest is never used."""
    _check_key(key)
    try:
        manifest = json.loads((volume_dir / key / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(manifest, dict) and manifest.get("format_version") == MANIFEST_VERSION
    return manifest if ok and manifest.get("key") == key else None


def publish(
    source: Path,
    volume_dir: Path,
    key: str,
    metadata: dict[str, Any],
    before_commit: Callable[[], None] | None = None,
) -> PublishResult:
    """Copy ``source`` to <volume>/<key> atomically with a manifest; first complete writer wins.

    ``before_commit`` runs after the temporary folder is complete and before the rename; tests
    use it to line up two writers.
    """
    _check_key(key)
    final = volume_dir / key
    if find_published(volume_dir, key) is not None:
        return PublishResult("exists", final, detail="a complete entry is already published")
    volume_dir.mkdir(parents=True, exist_ok=True)
    tmp = volume_dir / f"{TMP_PREFIX}{key}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    tmp.mkdir()
    try:
        manifest = _fill(source, tmp, key, metadata)
        if before_commit is not None:
            before_commit()
        return _commit(tmp, final, manifest)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _fill(source: Path, tmp: Path, key: str, metadata: dict[str, Any]) -> dict[str, Any]:
    entries: list[dict[str, Any]] = []
    total = 0
    for src in _regular_files(source):
        rel = src.relative_to(source).as_posix()
        if rel == MANIFEST_NAME:
            continue
        dst = tmp / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        size, sha = _copy_with_digest(src, dst)
        entries.append({"path": rel, "size": size, "sha256": sha})
        total += size
    manifest = {
        "format_version": MANIFEST_VERSION,
        "key": key,
        "created_unix": int(time.time()),
        "files": entries,
        "total_bytes": total,
        **metadata,
    }
    # The manifest is written last: its presence is what marks the copy as complete.
    _write_json(tmp / MANIFEST_NAME, manifest)
    _fsync_dir(tmp)
    return manifest


def _commit(tmp: Path, final: Path, manifest: dict[str, Any]) -> PublishResult:
    try:
        # rename(2) of a directory onto an existing non-empty directory fails, so a second
        # writer can never replace or mix into the first writer's entry.
        os.rename(tmp, final)
    except OSError as exc:
        if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
            raise
        if find_published(final.parent, final.name) is not None:
            return PublishResult("exists", final, detail="another writer published first")
        return PublishResult("blocked", final, detail="a folder without manifest holds the key")
    _fsync_dir(final.parent)
    files = manifest["files"]
    total = manifest["total_bytes"]
    return PublishResult("published", final, len(files), total if isinstance(total, int) else 0)


def restore(volume_dir: Path, key: str, dest: Path) -> RestoreResult | None:
    """Copy a published entry to local disk (§4.6: the cache is used from local disk, NFS lacks
    locking) and verify every size and sha256; None when nothing complete is published."""
    manifest = find_published(volume_dir, key)
    if manifest is None:
        return None
    source = volume_dir / key
    staging = dest.with_name(dest.name + f".restoring-{uuid.uuid4().hex[:8]}")
    staging.mkdir(parents=True)
    try:
        result = _restore_into(source, staging, manifest)
        if result.problems:
            return result
        if dest.exists():
            shutil.rmtree(dest)
        os.rename(staging, dest)
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _restore_into(source: Path, staging: Path, manifest: dict[str, Any]) -> RestoreResult:
    problems: list[str] = []
    total = 0
    for entry in manifest.get("files", []):
        rel = str(entry["path"])
        dst = staging / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            problems.append(f"{rel}: path escapes the cache folder")
            continue
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            size, sha = _copy_with_digest(source / rel, dst)
        except OSError as exc:
            problems.append(f"{rel}: {exc.strerror or exc}")
            continue
        total += size
        if size != entry.get("size") or sha != entry.get("sha256"):
            problems.append(f"{rel}: size or sha256 differs from the manifest")
    return RestoreResult(manifest, len(manifest.get("files", [])), total, problems)


def prune(volume_dir: Path, owner: str, retain: int, keep: str) -> list[str]:
    """Delete ``owner``'s older entries so at most ``retain`` remain (``keep`` always stays).

    Only complete entries whose manifest names ``owner`` are considered, newest first by
    ``created_unix``: a volume shared by several owners (an existing claim) loses nothing of
    the others. An entry is renamed away before it is removed, so a reader never sees half of
    it. Returns the pruned keys.
    """
    mine: list[tuple[int, str]] = []
    for folder in volume_dir.iterdir() if volume_dir.is_dir() else ():
        if folder.name.startswith(TMP_PREFIX) or not KEY_RE.match(folder.name):
            continue
        manifest = find_published(volume_dir, folder.name)
        if manifest is not None and manifest.get("owner") == owner and folder.name != keep:
            mine.append((int(manifest.get("created_unix") or 0), folder.name))
    mine.sort(reverse=True)
    pruned = [key for _, key in mine[max(retain - 1, 0) :]]
    for key in pruned:
        doomed = volume_dir / f"{TMP_PREFIX}pruned-{key}-{uuid.uuid4().hex[:12]}"
        try:
            os.rename(volume_dir / key, doomed)
        except OSError:
            continue  # another runner pruned it first
        shutil.rmtree(doomed, ignore_errors=True)
    return pruned
