"""Recipe-cache publication: atomic, manifest-gated, safe under crashes and a second writer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from support.paths import REPO_ROOT

from warmgate.warmup import cache


def recipes(root: Path, tag: bytes, count: int = 4) -> Path:
    (root / "sub").mkdir(parents=True)
    for i in range(count):
        (root / f"r{i}.bin").write_bytes(tag * (1000 + i))
    (root / "sub" / "nested.bin").write_bytes(tag * 7)
    return root


def visible_entries(volume: Path) -> list[str]:
    return sorted(p.name for p in volume.iterdir() if not p.name.startswith(cache.TMP_PREFIX))


def test_publish_then_restore_round_trip(tmp_path: Path) -> None:
    src = recipes(tmp_path / "src", b"a")
    result = cache.publish(src, tmp_path / "vol", "key-1", {"plan_hash": "sha256:x"})
    assert (result.status, result.files) == ("published", 5)
    manifest = cache.find_published(tmp_path / "vol", "key-1")
    assert manifest is not None
    assert manifest["plan_hash"] == "sha256:x"
    assert [f["path"] for f in manifest["files"]] == [
        "r0.bin",
        "r1.bin",
        "r2.bin",
        "r3.bin",
        "sub/nested.bin",
    ]
    restored = cache.restore(tmp_path / "vol", "key-1", tmp_path / "local")
    assert restored is not None
    assert restored.problems == []
    assert (tmp_path / "local" / "sub" / "nested.bin").read_bytes() == b"a" * 7
    assert visible_entries(tmp_path / "vol") == ["key-1"]
    assert [p.name for p in (tmp_path / "vol").iterdir()] == ["key-1"]  # no temp left behind


def test_folder_without_manifest_is_never_used(tmp_path: Path) -> None:
    (tmp_path / "vol" / "key-1").mkdir(parents=True)
    (tmp_path / "vol" / "key-1" / "r0.bin").write_bytes(b"half")
    assert cache.find_published(tmp_path / "vol", "key-1") is None
    assert cache.restore(tmp_path / "vol", "key-1", tmp_path / "local") is None
    result = cache.publish(recipes(tmp_path / "src", b"b"), tmp_path / "vol", "key-1", {})
    assert result.status == "blocked"
    assert cache.find_published(tmp_path / "vol", "key-1") is None


def test_restore_refuses_a_corrupted_entry(tmp_path: Path) -> None:
    cache.publish(recipes(tmp_path / "src", b"c"), tmp_path / "vol", "key-1", {})
    (tmp_path / "vol" / "key-1" / "r2.bin").write_bytes(b"flipped")
    restored = cache.restore(tmp_path / "vol", "key-1", tmp_path / "local")
    assert restored is not None
    assert restored.problems == ["r2.bin: size or sha256 differs from the manifest"]
    assert not (tmp_path / "local").exists()


def test_invalid_key_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="invalid cache key"):
        cache.publish(tmp_path, tmp_path / "vol", "../escape", {})


CRASH_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from pathlib import Path
    from warmgate.warmup import cache
    real = cache.{target}
    calls = []
    def dying(*args, **kwargs):
        calls.append(1)
        if len(calls) == {after}:
            os.kill(os.getpid(), signal.SIGKILL)
        return real(*args, **kwargs)
    cache.{target} = dying
    cache.publish(Path(sys.argv[1]), Path(sys.argv[2]), "key-1", {{}})
    """
)


@pytest.mark.parametrize(
    ("target", "after"),
    [("_copy_with_digest", 3), ("_write_json", 1), ("_fsync_dir", 1)],
    ids=["during-copy", "writing-manifest", "before-rename"],
)
def test_crash_midway_publishes_nothing_visible(tmp_path: Path, target: str, after: int) -> None:
    src = recipes(tmp_path / "src", b"d")
    volume = tmp_path / "vol"
    script = CRASH_SCRIPT.format(target=target, after=after)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", script, str(src), str(volume)], env=env, check=False, timeout=60
    )
    assert done.returncode == -signal.SIGKILL
    assert any(p.name.startswith(cache.TMP_PREFIX) for p in volume.iterdir())  # it did start
    assert visible_entries(volume) == []
    assert cache.find_published(volume, "key-1") is None
    assert cache.restore(volume, "key-1", tmp_path / "local") is None
    # A later writer is not disturbed by the debris.
    assert cache.publish(src, volume, "key-1", {}).status == "published"
    assert cache.restore(volume, "key-1", tmp_path / "local") is not None


def test_two_concurrent_writers_of_one_key(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    sources = {tag: recipes(tmp_path / tag.decode(), tag) for tag in (b"x", b"y")}
    barrier = threading.Barrier(2)
    results: dict[bytes, cache.PublishResult] = {}

    def write(tag: bytes) -> None:
        # Both writers have a complete temporary folder before either renames.
        meta = {"writer": tag.decode()}
        results[tag] = cache.publish(sources[tag], volume, "key-1", meta, barrier.wait)

    threads = [threading.Thread(target=write, args=(tag,)) for tag in sources]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    statuses = sorted(r.status for r in results.values())
    assert statuses == ["exists", "published"]
    winner = next(tag for tag, r in results.items() if r.status == "published")
    manifest = cache.find_published(volume, "key-1")
    assert manifest is not None
    assert manifest["writer"] == winner.decode()
    restored = cache.restore(volume, "key-1", tmp_path / "local")
    assert restored is not None
    assert restored.problems == []
    assert (tmp_path / "local" / "r0.bin").read_bytes() == winner * 1000
    assert [p.name for p in volume.iterdir()] == ["key-1"]


def test_writer_after_publication_leaves_entry_untouched(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    cache.publish(recipes(tmp_path / "a", b"a"), volume, "key-1", {"writer": "a"})
    before = (volume / "key-1" / cache.MANIFEST_NAME).read_text()
    result = cache.publish(recipes(tmp_path / "b", b"b"), volume, "key-1", {"writer": "b"})
    assert result.status == "exists"
    assert (volume / "key-1" / cache.MANIFEST_NAME).read_text() == before
    assert json.loads(before)["writer"] == "a"


def _published(volume: Path, key: str, owner: str, created: int, tmp: Path) -> None:
    src = recipes(tmp / f"src-{key}", b"p", count=1)
    cache.publish(src, volume, key, {"owner": owner})
    manifest = volume / key / cache.MANIFEST_NAME
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "created_unix": created}))


def test_prune_keeps_the_newest_entries_of_one_owner_only(tmp_path: Path) -> None:
    """Issue 11 item 8: superseded entries go, bounded by the retention count; a shared claim
    keeps every other owner's entries, and the entry just published always stays."""
    volume = tmp_path / "vol"
    for i, key in enumerate(["a-1", "a-2", "a-3", "a-4"]):
        _published(volume, key, "uid-a", 100 + i, tmp_path)
    _published(volume, "b-1", "uid-b", 50, tmp_path)
    (volume / "half-written").mkdir()  # no manifest: never touched
    pruned = cache.prune(volume, "uid-a", retain=2, keep="a-2")
    assert sorted(pruned) == ["a-1", "a-3"]
    assert visible_entries(volume) == ["a-2", "a-4", "b-1", "half-written"]
    assert cache.prune(volume, "uid-a", retain=2, keep="a-2") == []
    assert cache.prune(volume, "uid-a", retain=1, keep="a-4") == ["a-2"]
    assert visible_entries(volume) == ["a-4", "b-1", "half-written"]
