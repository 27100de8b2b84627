"""Serving drift, pure: what the serving Pods' runners counted -> status.drift and the Ready reason.

Each serving Pod runs the engine under the runner's serve mode (warmgate/warmup/serve/mode.py),
which counts the engine's "Configuration: ... was not warmed-up!" and "... was not prepared"
lines and serves them on its status port. The status is the record: shapes accumulate per
served plan (a Pod restart or a new replica loses nothing already recorded), and they reset
when the Deployment serves another plan. Shapes the current plan still misses come with a
proposal of seeds (`drift_seeds.propose`), which the operator never applies itself.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from warmgate.api.constants import Reason
from warmgate.api.status import MAX_UNCOVERED_LISTED, DriftSummary
from warmgate.buckets import BucketPlan
from warmgate.contract.board import ServeBoard
from warmgate.reconcile.planning.drift_seeds import propose
from warmgate.reconcile.planning.verdict import MESSAGE_LIMIT, Verdict
from warmgate.reconcile.sync.actions import Event

# Distinct shapes the status remembers (the count goes on beyond it).
MAX_REMEMBERED = MAX_UNCOVERED_LISTED


@dataclass(frozen=True)
class DriftState:
    """The drift the status records, and the shapes this sync saw for the first time."""

    summary: DriftSummary | None
    new_shapes: tuple[str, ...] = ()

    @property
    def observed(self) -> bool:
        """True when the served plan ran at least one unwarmed shape."""
        return bool(self.summary and self.summary.unwarmed_shapes)


def evaluate_drift(
    old: DriftSummary | None,
    docs: Iterable[ServeBoard],
    *,
    served: str | None,
    plan: BucketPlan | None,
    at: datetime,
) -> DriftState:
    """Merge what the serving Pods report into the record of the served plan.

    Each Pod reports every distinct shape it ran (its list only grows, across engine restarts),
    at every sync, and the record keeps the first `MAX_REMEMBERED`. So the count is the largest
    one that counts no shape twice: the remembered shapes and the others the Pods report now,
    or one Pod's own count, and never less than before. e.g. one Pod reporting 25 shapes
    keeps the count at 25 sync after sync (the 5 not remembered were counted again each time:
    25 -> 30 -> 35); a 26th shape makes it 26, with one Event and one new proposal.
    """
    if served is None:
        return DriftState(None)
    kept = old if old is not None and old.plan_hash == served else None
    shapes = list(kept.shapes or []) if kept else []
    before = kept.unwarmed_shapes or 0 if kept else 0
    misses = kept.not_prepared or 0 if kept else 0
    reported: list[str] = []  # the reported shapes not remembered, in the Pods' order
    most = 0
    for doc in docs:
        for shape in doc.unwarmed:
            if shape not in shapes and shape not in reported:
                reported.append(shape)
        most = max(most, doc.unwarmed_count)
        misses = max(misses, doc.not_prepared_count)
    count = max(before, len(shapes) + len(reported), most)
    if not count and not misses:
        return DriftState(None)
    # The shapes that raised the count: the Pods append, so the last reported are the newest.
    new = reported[max(0, len(reported) - (count - before)) :] if count > before else []
    remembered = (shapes + new)[:MAX_REMEMBERED]
    summary = DriftSummary(
        plan_hash=served,
        unwarmed_shapes=count,
        not_prepared=misses,
        shapes=remembered or None,
        first_observed_time=kept.first_observed_time if kept else at,
    )
    summary = _with_proposal(summary, kept, plan, remembered != shapes)
    return DriftState(summary, tuple(new))


def _with_proposal(
    summary: DriftSummary, kept: DriftSummary | None, plan: BucketPlan | None, changed: bool
) -> DriftSummary:
    """Propose seeds when the shapes changed (planning runs only then); else keep the last."""
    if not changed and kept is not None:
        update = {"proposed_seeds": kept.proposed_seeds, "proposal": kept.proposal}
        return summary.model_copy(update=update)
    if plan is None or not summary.shapes:
        return summary
    seeds, text = propose(plan, summary.shapes)
    return summary.model_copy(update={"proposed_seeds": seeds, "proposal": text})


def with_drift(ready: Verdict, drift: DriftState | None) -> Verdict:
    """Ready keeps its status (the replicas serve) and says that shapes ran unwarmed."""
    if drift is None or not drift.observed or ready.status != "True" or drift.summary is None:
        return ready
    summary = drift.summary
    listed = ", ".join((summary.shapes or [])[:5])
    message = (
        f"{ready.message}; the serving engine ran {summary.unwarmed_shapes} shape(s) the "
        f"verified plan did not warm: {listed}"
    )
    if summary.proposal:
        message += f". {summary.proposal}"
    return Verdict("True", Reason.UNWARMED_SHAPE_OBSERVED, message[:MESSAGE_LIMIT])


def drift_events(drift: DriftState) -> tuple[Event, ...]:
    """A Warning Event naming the shapes seen for the first time."""
    message = event_message(drift)
    if message is None:
        return ()
    return (Event("Warning", Reason.UNWARMED_SHAPE_OBSERVED, message),)


def event_message(drift: DriftState) -> str | None:
    """The Warning Event's message for the shapes seen for the first time, or None."""
    if not drift.new_shapes or drift.summary is None:
        return None
    plan = (drift.summary.plan_hash or "")[:12]
    shapes = ", ".join(drift.new_shapes[:10])
    text = f"Serving plan {plan} ran {len(drift.new_shapes)} unwarmed shape(s): {shapes}"
    if drift.summary.proposal:
        text += f". {drift.summary.proposal}"
    return text[:MESSAGE_LIMIT]
