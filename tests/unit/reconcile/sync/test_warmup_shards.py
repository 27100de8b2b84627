"""A sharded warmup's Warmed verdict (issue 38): every slice and the merge, by Pod index."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_warmup_state import KEY, OWNED, TEMPLATE, TRACKED

from warmgate.api.status import WarmupShards
from warmgate.contract.shardspec import shard_key
from warmgate.reconcile.sync.warmup_shards import INDEX_ANNOTATION, job_shards, read_shards
from warmgate.reconcile.sync.warmup_state import evaluate_warmup

N = 4


def sharded_job(*conditions: str) -> dict[str, Any]:
    conds = [{"type": c, "status": "True"} for c in conditions]
    meta = {"name": "w-job", "uid": "uid-job-1", "creationTimestamp": "2026-11-29T12:00:00Z"}
    spec = {"template": TEMPLATE, "completionMode": "Indexed", "completions": N, "parallelism": N}
    return {"metadata": meta, "spec": spec, "status": {"conditions": conds, "succeeded": N}}


def summary(index: int, outcome: str = "verified", **shard: Any) -> str:
    if index == 0:
        doc = {"role": "merge", "index": 0, "count": N, "merged": N, "slice": "verified"}
        key = KEY
    else:
        doc = {"role": "slice", "index": index, "count": N}
        key = shard_key(KEY, index, N)
    doc.update(shard)
    return json.dumps({"v": 7, "outcome": outcome, "code": 0, "key": key, "shard": doc})


def pod(index: int, message: str | None, created: str = "2026-11-29T12:00:00Z") -> dict[str, Any]:
    terminated = {"exitCode": 0} | ({"message": message} if message else {})
    meta = {
        "name": f"w-job-{index}-x",
        "creationTimestamp": created,
        "ownerReferences": OWNED,
        "annotations": {INDEX_ANNOTATION: str(index)},
        **TRACKED,
    }
    return {
        "metadata": meta,
        "spec": TEMPLATE["spec"],
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{"name": "warmup", "state": {"terminated": terminated}}],
        },
    }


def all_verified() -> list[dict[str, Any]]:
    return [pod(i, summary(i)) for i in range(N)]


def test_only_an_indexed_job_of_several_completions_is_sharded() -> None:
    assert job_shards(sharded_job()) == N
    plain = sharded_job()
    del plain["spec"]["completionMode"]
    assert job_shards(plain) == 1


def test_every_slice_and_the_merge_verified_is_warmed() -> None:
    state = evaluate_warmup(sharded_job("Complete"), all_verified(), KEY)
    assert state.verdict.status == "True", state.verdict.message
    seen = read_shards(sharded_job("Complete"), all_verified(), KEY)
    assert (seen.count, seen.verified, seen.gap) == (N, N, None)


@pytest.mark.parametrize(
    ("pods", "named"),
    [
        # a slice missing: no Pod of index 2 at all
        ([pod(i, summary(i)) for i in (0, 1, 3)], "shard 2 of 4: no Pod"),
        # a slice failed
        (
            [pod(i, summary(i, "plan_mismatch" if i == 3 else "verified")) for i in range(N)],
            "shard 3 of 4: plan_mismatch",
        ),
        # a duplicated slice: Pod 2 speaks for slice 1's key
        (
            [pod(i, summary(1 if i == 2 else i)) for i in range(N)],
            f"shard 2 of 4: speaks for key {shard_key(KEY, 1, N)}",
        ),
        # the merge merged fewer slices than planned
        (
            [pod(0, summary(0, merged=3)), *[pod(i, summary(i)) for i in (1, 2, 3)]],
            "shard 0 of 4: merged 3 of 4 slices",
        ),
        # Pod 0's own slice failed: the merge never ran, its summary is the slice's
        (
            [
                pod(0, json.dumps({"outcome": "unwarmed_shapes", "key": shard_key(KEY, 0, N)})),
                *[pod(i, summary(i)) for i in (1, 2, 3)],
            ],
            "shard 0 of 4: slice unwarmed_shapes",
        ),
        # a slice that failed before it read its plan (no key): its own outcome, not a key
        (
            [
                pod(i, summary(i))
                if i != 3
                else pod(3, json.dumps({"outcome": "plan_invalid", "reason": "cannot read plan"}))
                for i in range(N)
            ],
            "shard 3 of 4: plan_invalid: cannot read plan",
        ),
        # a slice without a summary
        ([pod(i, summary(i) if i != 1 else None) for i in range(N)], "shard 1 of 4: no runner"),
    ],
)
def test_a_slice_missing_failed_or_duplicated_is_not_warmed_and_named(
    pods: list[dict[str, Any]], named: str
) -> None:
    state = evaluate_warmup(sharded_job("Complete"), pods, KEY)
    assert state.verdict.status == "False"
    assert state.verdict.reason == "WarmupFailed"
    assert named in state.verdict.message


def test_a_failed_sharded_job_names_the_failed_shard() -> None:
    pods = [pod(i, summary(i, "engine_failed" if i == 2 else "verified")) for i in range(N)]
    pods[0] = pod(0, summary(0, "shard_missing", merged=3))
    state = evaluate_warmup(sharded_job("Failed"), pods, KEY)
    assert state.verdict.status == "False"
    assert "failed: shard 2 of 4: engine_failed" in state.verdict.message


def test_the_shard_that_failed_the_job_is_named_before_the_ones_it_stopped() -> None:
    """Shard 2's engine failed; the Job controller then deleted the other active Pods: index 1
    has no Pod left, index 3 was stopped (SIGTERM, timed_out), Pod 0's merge was stopped too.
    The reason names shard 2, whatever the order of the indexes."""
    pods = [
        pod(0, summary(0, "timed_out", merged=0)),
        pod(2, summary(2, "engine_failed")),
        pod(3, summary(3, "timed_out")),
    ]
    state = evaluate_warmup(sharded_job("Failed"), pods, KEY)
    assert "failed: shard 2 of 4: engine_failed" in state.verdict.message
    # Without a shard failing on its own, the stopped one comes before the missing one.
    pods = [pod(0, summary(0, "timed_out", merged=0)), pod(3, summary(3, "timed_out"))]
    state = evaluate_warmup(sharded_job("Failed"), pods, KEY)
    assert "failed: shard 3 of 4: timed_out" in state.verdict.message


def test_attempts_count_the_jobs_tries_not_its_n_pods() -> None:
    job = sharded_job("Complete")
    job["status"].update({"succeeded": N, "failed": 1})
    retried = pod(3, summary(3, "engine_failed"), created="2026-11-29T11:00:00Z")
    assert evaluate_warmup(job, all_verified(), KEY).summary.attempts == 1
    assert evaluate_warmup(job, [*all_verified(), retried], KEY).summary.attempts == 2
    # before its first Pod: one attempt under way (the Job's active count), not N
    job = sharded_job()
    job["status"] = {"active": N}
    assert evaluate_warmup(job, [], KEY).summary.attempts == 1


def test_the_newest_pod_of_an_index_speaks_for_it() -> None:
    pods = [*all_verified(), pod(3, summary(3, "engine_failed"), created="2026-11-29T11:00:00Z")]
    assert evaluate_warmup(sharded_job("Complete"), pods, KEY).verdict.status == "True"
    pods = [*all_verified(), pod(3, summary(3, "engine_failed"), created="2026-11-29T13:00:00Z")]
    assert evaluate_warmup(sharded_job("Complete"), pods, KEY).verdict.status == "False"


def test_the_status_counts_the_shards() -> None:
    state = evaluate_warmup(sharded_job("Complete"), all_verified(), KEY)
    assert state.summary.shards == WarmupShards(planned=4, running=0, verified=4)
    pods = [pod(i, summary(i, "plan_mismatch" if i == 1 else "verified")) for i in range(N)]
    pods.append(pod(1, None, created="2026-11-29T13:00:00Z"))
    pods[-1]["status"]["phase"] = "Running"
    state = evaluate_warmup(sharded_job(), pods, KEY)
    assert state.summary.shards == WarmupShards(planned=4, running=1, verified=3)


INDEX_VAR = {
    "name": "JOB_COMPLETION_INDEX",
    "valueFrom": {
        "fieldRef": {
            "apiVersion": "v1",
            "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']",
        }
    },
}


def test_the_index_the_job_controller_adds_is_the_templates_and_nothing_else() -> None:
    """An Indexed Job's Pods carry JOB_COMPLETION_INDEX in every container (the Job controller
    adds it): still the template. The same name with a value of the Pod's own is not."""
    from warmgate.reconcile.sync.pod_template import template_mismatch

    template = {"spec": {"containers": [{"name": "warmup", "image": "i", "env": []}]}}
    pod = {"spec": {"containers": [{"name": "warmup", "image": "i", "env": [INDEX_VAR]}]}}
    assert template_mismatch(pod, template) is None
    forged = {"name": "JOB_COMPLETION_INDEX", "value": "1"}
    pod["spec"]["containers"][0]["env"] = [forged]
    assert template_mismatch(pod, template) == "container warmup: env differs"
