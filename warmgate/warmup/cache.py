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

from warmgate.contract.order import KEY_RE, CacheSpec, CacheUsers

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
# Temporary folders sit beside the final one (same volume, so rename is atomic) and carry a
# prefix no cache key can have: readers only ever look at <volume>/<key>/manifest.json.
TMP_PREFIX = ".warmgate-tmp-"
_BUF = 1024 * 1024
# An entry of a gone owner is pruned only when published this long before the operator read
# who uses the volume: an object created after that read (not among the users) cannot have
# published so early, even on a node whose clock is up to an hour off the operator's.
ORPHAN_GRACE_S = 3600


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


def _entries(volume_dir: Path) -> list[tuple[str, dict[str, Any]]]:
    """The complete entries on the volume, (key, manifest): temporary folders, names no key can
    have and folders without a valid manifest naming their key are never entries."""
    found: list[tuple[str, dict[str, Any]]] = []
    for folder in sorted(volume_dir.iterdir()) if volume_dir.is_dir() else ():
        if folder.name.startswith(TMP_PREFIX) or not KEY_RE.match(folder.name):
            continue
        manifest = find_published(volume_dir, folder.name)
        if manifest is not None:
            found.append((folder.name, manifest))
    return found


def remove(volume_dir: Path, key: str) -> bool:
    """Delete one published entry (a sharded warmup's merged slice); False when none was."""
    _check_key(key)
    return _remove(volume_dir, key)


def _remove(volume_dir: Path, key: str) -> bool:
    """Rename an entry away, then delete it, so a reader never sees half of it."""
    doomed = volume_dir / f"{TMP_PREFIX}pruned-{key}-{uuid.uuid4().hex[:12]}"
    try:
        os.rename(volume_dir / key, doomed)
    except OSError:
        return False  # another runner pruned it first
    shutil.rmtree(doomed, ignore_errors=True)
    return True


def prune(
    volume_dir: Path, owner: str, retain: int, keep: str, protect: frozenset[str] = frozenset()
) -> list[str]:
    """Delete ``owner``'s older entries so at most ``retain`` remain (``keep`` always stays).

    Only complete entries whose manifest names ``owner`` are considered, newest first by
    ``created_unix``: a volume shared by several owners (an existing claim) loses nothing of
    the others. A key in ``protect`` (one a live object warms or serves, e.g. another object
    of the same spec that found this entry published) stays, but still counts as one of the
    ``retain``. Returns the pruned keys.
    """
    mine = [
        (int(manifest.get("created_unix") or 0), key)
        for key, manifest in _entries(volume_dir)
        if manifest.get("owner") == owner and key != keep
    ]
    mine.sort(reverse=True)
    doomed = [key for _, key in mine[max(retain - 1, 0) :] if key not in protect]
    return [key for key in doomed if _remove(volume_dir, key)]


def prune_orphans(
    volume_dir: Path,
    users: CacheUsers,
    keep: str,
    namespace: str | None,
    grace_s: int = ORPHAN_GRACE_S,
) -> list[str]:
    """Delete the entries of objects that are gone: what a deleted object published on a
    shared claim, which no runner of its own will ever prune.

    An entry goes only when all of these hold: its manifest names an owner and, as
    ``owner_namespace``, ``namespace``, the one the users were listed in (our tag: a folder
    without a manifest, a manifest without them, or another namespace's entry on a volume
    shared across namespaces is never touched); that owner is not among the live
    ``users.owners``; no live object warms or serves its key (``users.keys``); it is not
    ``keep``; and it was published more than ``grace_s`` before the operator read the users
    (``users.as_of_unix``), so an object created after that read, or a clock apart by less
    than ``grace_s``, never loses an entry. Returns the pruned keys.
    """
    before = users.as_of_unix - grace_s
    doomed = [
        key
        for key, manifest in _entries(volume_dir)
        if _orphan(manifest, users, namespace)
        and key != keep
        and key not in users.keys
        and _published(manifest) < before
    ]
    return [key for key in doomed if _remove(volume_dir, key)]


def _published(manifest: dict[str, Any]) -> float:
    """When the entry was published; an unreadable time is the future (never old enough)."""
    created = manifest.get("created_unix")
    if isinstance(created, int) and not isinstance(created, bool):
        return float(created)
    return float("inf")


def _orphan(manifest: dict[str, Any], users: CacheUsers, namespace: str | None) -> bool:
    if namespace is None or manifest.get("owner_namespace") != namespace:
        return False
    owner = manifest.get("owner")
    return isinstance(owner, str) and bool(owner) and owner not in users.owners


def tidy(spec: CacheSpec, report_dir: Path) -> dict[str, Any]:
    """The runner's prune after a publication: this owner's entries beyond `retain` (never a
    key a live object uses, when the operator said which), then the entries of owners that are
    gone (only with the operator's list of users); each pruned key's report goes too. What it
    did, for the report: ``pruned``, ``pruned_orphans``, or ``prune_error``."""
    users = spec.users
    done: dict[str, list[str]] = {}
    protect = users.keys if users is not None else frozenset()
    try:
        if spec.owner is not None and spec.retain > 0:
            done["pruned"] = prune(spec.volume_dir, spec.owner, spec.retain, spec.key, protect)
        if users is not None:
            orphans = prune_orphans(spec.volume_dir, users, spec.key, spec.namespace)
            done["pruned_orphans"] = orphans
        for key in [*done.get("pruned", []), *done.get("pruned_orphans", [])]:
            (report_dir / f"{key}.json").unlink(missing_ok=True)
    except OSError as exc:
        return {**done, "prune_error": str(exc)}
    return dict(done)


@dataclass
class MergeResult:
    """What merging the slices' entries into one local folder found (sharded warmup, issue 38).

    ``missing``: keys with no complete entry; ``problems``: a file that did not copy or match
    its manifest (the merge is then unusable); ``shared``: relative paths more than one slice
    published (the same graph compiled by two engines: the first copy is kept, ``differing``
    counts those whose bytes differ)."""

    files: int = 0
    total_bytes: int = 0
    missing: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    shared: int = 0
    differing: int = 0


def merge(volume_dir: Path, keys: list[str], dest: Path) -> MergeResult:
    """Copy every listed entry into ``dest`` (emptied first), each file checked against its
    entry's manifest as in `restore`; a path two entries hold is kept from the first."""
    result = MergeResult()
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    seen: dict[str, str] = {}
    for key in keys:
        _check_key(key)
        manifest = find_published(volume_dir, key)
        if manifest is None:
            result.missing.append(key)
            continue
        staging = dest.with_name(dest.name + f".merging-{uuid.uuid4().hex[:8]}")
        staging.mkdir(parents=True)
        try:
            part = _restore_into(volume_dir / key, staging, manifest)
            result.problems.extend(f"{key}: {p}" for p in part.problems)
            for entry in manifest.get("files", []):
                rel, sha = str(entry["path"]), str(entry.get("sha256"))
                if rel in seen:
                    result.shared += 1
                    result.differing += seen[rel] != sha
                    continue
                seen[rel] = sha
                target = dest / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                if (staging / rel).is_file():
                    os.replace(staging / rel, target)
                    result.files += 1
                    result.total_bytes += target.stat().st_size
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return result
