"""The status merge patch (RFC 7386): this operator's removed keys are nulled at every depth,
fields a newer operator wrote are never nulled (issue 23 item 13, issue 24 item 4)."""

from __future__ import annotations

from warmgate.api import SpecDecodeDeploymentStatus
from warmgate.reconcile.sync.status_builder import status_patch


def _status(doc: dict[str, object]) -> SpecDecodeDeploymentStatus:
    return SpecDecodeDeploymentStatus.model_validate(doc)


def test_a_removed_nested_field_of_this_operator_is_nulled() -> None:
    old = _status({"warmup": {"jobName": "j", "progress": {"percent": 40}}})
    new = _status({"warmup": {"jobName": "j"}})
    assert status_patch(old, new) == {"warmup": {"progress": None, "jobName": "j"}}


def test_fields_a_newer_operator_wrote_are_never_nulled_at_any_depth() -> None:
    old = _status({"futureField": "v2", "warmup": {"jobName": "j", "futureDetail": 7}})
    new = _status({"warmup": {"jobName": "k"}})
    assert status_patch(old, new) == {"warmup": {"jobName": "k"}}


def test_an_unchanged_status_sends_nothing() -> None:
    old = _status({"futureField": "v2", "warmup": {"jobName": "j", "futureDetail": 7}})
    assert status_patch(old, old) == {}
