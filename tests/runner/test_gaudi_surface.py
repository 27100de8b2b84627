"""The engine plugin's assumptions about vllm-gaudi, against a record of its source (issue 33
item 4).

``data/vllm_gaudi_surface.json`` is ``hack/vllm-gaudi-surface.py``'s output at the two pinned
commits (v0.26.0 = b059f9c9, main = 091bbadd): the parameters of the methods the plugin calls
or wraps and every ``self.<attribute>`` of ``HPUModelRunner`` and ``HpuEagleProposer``. The
plugin declares what it relies on (``drafter_warm.GAUDI_SURFACE``, ``PROFILE_SURFACE``); these
tests fail when the two part. To move a pin: regenerate the record with the script, read the
diff, and change the plugin where it must. Nothing here ran on Gaudi.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from warmgate.buckets.engine.config import Profile
from warmgate.contract.drafterwarm import PROFILES
from warmgate.warmup.hook import plugin
from warmgate.warmup.hook.drafter_warm import GAUDI_SURFACE, PROFILE_SURFACE, surface_problems

RECORD = json.loads((Path(__file__).parent / "data" / "vllm_gaudi_surface.json").read_text())
COMMITS = {"v0.26.0": "b059f9c9", "main-2026-08": "091bbadd"}


def test_the_record_holds_both_pinned_commits_and_the_profiles_match_the_planners() -> None:
    assert {p: RECORD["profiles"][p]["commit"] for p in RECORD["profiles"]} == COMMITS
    assert set(PROFILES) == set(COMMITS) == set(PROFILE_SURFACE) == set(Profile.__args__)  # type: ignore[attr-defined]


@pytest.mark.parametrize("profile", sorted(COMMITS))
@pytest.mark.parametrize("part", ["runner", "proposer"])
def test_every_method_the_plugin_calls_has_the_parameters_it_passes(
    profile: str, part: str
) -> None:
    record = RECORD["profiles"][profile][part]
    wanted = dict(GAUDI_SURFACE[part]["methods"])
    if part == "runner":
        wanted.update(PROFILE_SURFACE[profile])
    assert GAUDI_SURFACE[part]["class"] == record["class"]
    for name, params in wanted.items():
        assert name in record["methods"], f"{record['class']}.{name} is gone at {profile}"
        found = record["methods"][name]
        assert found[: len(params)] == params, (name, profile, found)
        assert name != "get_habana_paged_attn_buffers" or found == params  # the profile's side


@pytest.mark.parametrize("profile", sorted(COMMITS))
def test_every_attribute_the_plugin_reads_is_one_the_class_has(profile: str) -> None:
    for part in ("runner", "proposer"):
        record = RECORD["profiles"][profile][part]
        missing = set(GAUDI_SURFACE[part]["attributes"]) - set(record["self_attributes"])
        assert not missing, (part, profile, missing)
    assert RECORD["profiles"][profile]["proposer"]["bases"] == GAUDI_SURFACE["proposer"]["bases"]


def test_the_hooks_targets_are_in_the_record() -> None:
    """The compile hook wraps HPUModelRunner.sample_tokens and warmup_model and
    HpuEagleProposer.propose (plugin.attach_runner, attach_drafter) in the recorded files."""
    for profile in COMMITS:
        runner, proposer = (RECORD["profiles"][profile][p] for p in ("runner", "proposer"))
        assert runner["path"].replace("/", ".").removesuffix(".py") == plugin.RUNNER_MODULE
        assert proposer["path"].replace("/", ".").removesuffix(".py") == plugin.EAGLE_MODULE
        assert {"sample_tokens", "warmup_model"} <= set(runner["methods"])
        assert "propose" in proposer["methods"]


def _classes(profile: str, drop: str | None = None) -> Any:
    """Classes shaped like the record (the parameters only), for surface_problems."""

    def method(params: list[str]) -> Any:
        names = ", ".join(params)
        scope: dict[str, Any] = {}
        exec(f"def f({names}): pass", scope)  # a signature from the record
        return scope["f"]

    parts = {}
    for part in ("runner", "proposer"):
        methods = RECORD["profiles"][profile][part]["methods"]
        body = {n: method(p) for n, p in methods.items() if n != drop}
        parts[part] = type(part, (), body)()
    runner = parts["runner"]
    runner.drafter = parts["proposer"]
    return runner


@pytest.mark.parametrize("profile", sorted(COMMITS))
def test_the_plugin_checks_the_engine_it_finds_against_the_same_surface(profile: str) -> None:
    assert surface_problems(_classes(profile), profile) == []
    moved = surface_problems(_classes(profile, drop="prepare_attn_metadata"), profile)
    assert moved == ["proposer.prepare_attn_metadata: missing"]
    other = "main-2026-08" if profile == "v0.26.0" else "v0.26.0"
    assert surface_problems(_classes(profile), other)  # the profile picks: the other one differs
    assert surface_problems(SimpleNamespace(drafter=None), profile)[-1] == "proposer: missing"
