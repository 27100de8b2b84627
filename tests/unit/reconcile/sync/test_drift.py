"""A drafter compile while serving reaches status.drift and Ready's reason (issue 33 item 2),
with no seed proposed for it: seeds warm the target's buckets, not drafter graphs."""

from __future__ import annotations

from datetime import UTC, datetime

from warmgate.api.constants import Reason
from warmgate.buckets import EngineShapeConfig, plan_buckets
from warmgate.reconcile.planning.drift_seeds import DRAFTER_NO_SEEDS
from warmgate.reconcile.planning.verdict import Verdict
from warmgate.reconcile.sync.drift import evaluate_drift, with_drift
from warmgate.warmup.hook.lines import format_hook_line
from warmgate.warmup.serve.tally import ServeTally
from warmgate.warmup.serve.watch import Watch

AT = datetime(2026, 12, 5, tzinfo=UTC)


def test_a_drafter_compile_while_serving_is_drift_without_a_seed_proposal() -> None:
    state = ServeTally()
    watch = Watch(state, lambda: None)
    watch.line_hooks.append(watch.drafter)
    line = format_hook_line("compile", 3, 1.0, where="drafter", graph=["decode", 8, 1, 24], count=1)
    watch.feed(line, "err")
    board = state.board()
    plan = plan_buckets(
        EngineShapeConfig(max_num_seqs=8, max_model_len=4096, max_num_batched_tokens=2048)
    )
    drift = evaluate_drift(None, [board], served="p", plan=plan, at=AT)
    assert drift.summary is not None
    assert (drift.summary.unwarmed_shapes, drift.summary.shapes) == (
        1,
        ["drafter (decode, 8, 1, 24)"],
    )
    assert drift.summary.proposed_seeds is None
    assert drift.summary.proposal == DRAFTER_NO_SEEDS
    ready = with_drift(Verdict("True", Reason.REPLICAS_READY, "serving"), drift)
    assert ready.reason == Reason.UNWARMED_SHAPE_OBSERVED
    assert "drafter (decode, 8, 1, 24)" in ready.message
