"""The runner's prune on a real folder tree: a gone object's entries on a shared claim, and the
bounds (issue 23 item 12): never an entry without our tag, never one a live object uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from runner_harness import make_plan

from warmgate.contract.order import CacheSpec, CacheUsers, PlanError, parse_plan
from warmgate.warmup import cache

NOW = 1_800_000_000
OLD = NOW - cache.ORPHAN_GRACE_S - 1  # published more than the grace before the operator read


NS = "team-a"


def entry(
    volume: Path, key: str, owner: object, created: object = OLD, namespace: str | None = NS
) -> None:
    """A published entry: one recipe file, then its manifest as the runner writes it."""
    src = volume.parent / f"src-{key}"
    src.mkdir(parents=True)
    (src / "r0.bin").write_bytes(b"x" * 100)
    meta = {} if owner is None else {"owner": owner, "owner_namespace": namespace}
    assert cache.publish(src, volume, key, meta).status == "published"
    manifest = volume / key / cache.MANIFEST_NAME
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "created_unix": created}))


def on_volume(volume: Path) -> list[str]:
    return sorted(p.name for p in volume.iterdir() if not p.name.startswith(cache.TMP_PREFIX))


def users(owners: tuple[str, ...] = ("uid-live",), keys: tuple[str, ...] = ()) -> CacheUsers:
    return CacheUsers(frozenset(owners), frozenset(keys), NOW)


def test_a_gone_objects_entries_go_and_nothing_else(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    entry(volume, "gone-1", "uid-gone")
    entry(volume, "gone-2", "uid-gone")
    entry(volume, "live-1", "uid-live")
    entry(volume, "shared", "uid-gone")  # published by the gone object, used by a live one
    entry(volume, "untagged", None)  # a manifest without an owner: not ours to judge
    entry(volume, "fresh", "uid-gone", created=NOW - 60)  # after the read, minus the grace
    entry(volume, "odd-time", "uid-gone", created="yesterday")
    entry(volume, "mine", "uid-gone")  # the key this runner just published
    # The same storage mounted from another namespace: its objects are not on this list.
    entry(volume, "other-ns", "uid-gone", namespace="team-b")
    entry(volume, "no-ns", "uid-gone", namespace=None)  # published before the tag existed
    (volume / "no-manifest").mkdir()
    (volume / "no-manifest" / "r.bin").write_bytes(b"y")
    (volume / f"{cache.TMP_PREFIX}gone-3-1-abc").mkdir()  # someone's copy in progress
    pruned = cache.prune_orphans(volume, users(keys=("shared",)), "mine", NS)
    assert sorted(pruned) == ["gone-1", "gone-2"]
    assert on_volume(volume) == [
        "fresh", "live-1", "mine", "no-manifest", "no-ns", "odd-time", "other-ns", "shared",
        "untagged",
    ]  # fmt: skip
    assert (volume / f"{cache.TMP_PREFIX}gone-3-1-abc").is_dir()
    assert cache.prune_orphans(volume, users(keys=("shared",)), "mine", NS) == []
    assert cache.prune_orphans(volume, users(), "mine", None) == []  # no namespace: no judging


def test_an_entry_is_pruned_only_past_the_grace(tmp_path: Path) -> None:
    """An object created after the operator read the users is not among them; its entries are
    younger than the read, so the grace (and any clock skew below it) keeps them."""
    volume = tmp_path / "vol"
    entry(volume, "at-edge", "uid-new", created=NOW - cache.ORPHAN_GRACE_S)
    entry(volume, "past-edge", "uid-new", created=NOW - cache.ORPHAN_GRACE_S - 1)
    assert cache.prune_orphans(volume, users(), "other", NS) == ["past-edge"]


def test_retention_never_prunes_a_key_a_live_object_uses(tmp_path: Path) -> None:
    """Two objects of the same spec share a key: the second found the first's entry published.
    The first's retention must not delete it under the second (nor the entry it serves)."""
    volume = tmp_path / "vol"
    for i, key in enumerate(["a-1", "a-2", "a-3"]):
        entry(volume, key, "uid-a", created=100 + i)
    assert cache.prune(volume, "uid-a", 1, "a-3", protect=frozenset({"a-1"})) == ["a-2"]
    assert on_volume(volume) == ["a-1", "a-3"]


def spec(volume: Path, found: CacheUsers | None, retain: int = 1) -> CacheSpec:
    local = volume.parent / "local" / "x"
    return CacheSpec(
        volume, "a-3", local, 64, True, owner="uid-a", retain=retain, users=found, namespace=NS
    )


def test_tidy_prunes_both_and_drops_their_reports(tmp_path: Path) -> None:
    volume, reports = tmp_path / "vol", tmp_path / "vol" / "reports"
    for i, key in enumerate(["a-1", "a-2", "a-3"]):
        entry(volume, key, "uid-a", created=100 + i)
    entry(volume, "b-1", "uid-b")
    reports.mkdir()
    for key in ("a-1", "a-2", "a-3", "b-1", "b-failed"):
        (reports / f"{key}.json").write_text("{}")
    found = CacheUsers(frozenset({"uid-a"}), frozenset({"a-2"}), NOW)
    done = cache.tidy(spec(volume, found), reports)
    assert done == {"pruned": ["a-1"], "pruned_orphans": ["b-1"]}
    assert on_volume(volume) == ["a-2", "a-3", "reports"]
    assert sorted(p.name for p in reports.iterdir()) == ["a-2.json", "a-3.json", "b-failed.json"]


def test_tidy_without_the_operators_list_prunes_no_other_owner(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    entry(volume, "a-1", "uid-a", created=100)
    entry(volume, "b-1", "uid-b")
    assert cache.tidy(spec(volume, None, retain=1), tmp_path / "reports") == {"pruned": ["a-1"]}
    assert on_volume(volume) == ["b-1"]


def test_tidy_reports_an_error_instead_of_raising(tmp_path: Path) -> None:
    volume = tmp_path / "vol"
    entry(volume, "b-1", "uid-b")
    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "b-1.json").mkdir()  # a folder where the report should be: unlink fails
    done = cache.tidy(spec(volume, users(), retain=0), reports)
    assert done["pruned_orphans"] == ["b-1"]
    assert "b-1.json" in done["prune_error"]


def plan_with(raw: dict[str, Any], section: object) -> Any:
    raw["cache"]["users"] = section
    return parse_plan(raw)


def test_the_plan_carries_the_users(tmp_path: Path) -> None:
    section = {"owners": ["uid-a", "uid-b"], "keys": ["gaudi2-tp1-abc"], "as_of_unix": NOW}
    plan = plan_with(make_plan(tmp_path), section)
    assert plan.cache.users == CacheUsers(
        frozenset({"uid-a", "uid-b"}), frozenset({"gaudi2-tp1-abc"}), NOW
    )
    assert parse_plan(make_plan(tmp_path)).cache.users is None


@pytest.mark.parametrize(
    ("section", "problem"),
    [
        ({"owners": [], "keys": ["../up"], "as_of_unix": 1}, "plan.cache.users.keys: '../up'"),
        ({"owners": [], "keys": [], "as_of_unix": -1}, "plan.cache.users.as_of_unix"),
        ({"owners": [], "keys": []}, "plan.cache.users.as_of_unix: required"),
        ({"owners": [1], "keys": [], "as_of_unix": 1}, "plan.cache.users.owners"),
        ({"owners": [], "keys": [], "as_of_unix": 1, "x": 1}, "plan.cache.users.x: unknown"),
    ],
)
def test_a_bad_users_section_is_refused(tmp_path: Path, section: object, problem: str) -> None:
    with pytest.raises(PlanError) as caught:
        plan_with(make_plan(tmp_path), section)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_the_operators_listing_keeps_only_what_can_name_an_entry(tmp_path: Path) -> None:
    """What a listing found is written by anyone who may write those objects: non-text and
    empty values are no users, and a key that cannot name an entry is dropped, so the plan the
    operator writes from it is one the runner takes (a round trip through plan.json)."""
    found = CacheUsers.listed(
        ["uid-a", "", None, 7], ["gaudi2-tp1-abc", "../up", "", {"k": 1}, "a b"], NOW
    )
    assert found == CacheUsers(frozenset({"uid-a"}), frozenset({"gaudi2-tp1-abc"}), NOW)
    assert found.with_user("uid-b", "gaudi2-tp1-def") == CacheUsers(
        frozenset({"uid-a", "uid-b"}), frozenset({"gaudi2-tp1-abc", "gaudi2-tp1-def"}), NOW
    )
    assert found.with_user(None, "../x") == found
    assert plan_with(make_plan(tmp_path), found.to_json()).cache.users == found
