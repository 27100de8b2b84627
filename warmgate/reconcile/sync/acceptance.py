"""Spec-decode acceptance, pure: the serving runners' `spec_decode` counters -> status.serving.

Each serving Pod's runner reads its engine's own counters (vLLM's `/metrics`:
`vllm:spec_decode_num_drafts_total`, `..._num_draft_tokens_total`,
`..._num_accepted_tokens_total`, and the accepted tokens per draft position) and serves their
totals since the Pod's first engine start under `spec_decode` (docs/runner.md, "Spec-decode
acceptance"). The operator sums them over the Running Pods of the served plan and derives the
two figures that say whether k pays off: the acceptance rate (accepted / drafted tokens) and
the mean acceptance length (1 + accepted / drafts: tokens a request gains per target step,
at most 1 + k). The counters grow with every request, so a new reading is written at most
once per `MIN_WRITE_INTERVAL_S`, unless the served plan changed or none was recorded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Final

from warmgate.api.status import MAX_DRAFT_POSITIONS, ServingSummary, SpecDecodeAcceptance
from warmgate.contract.board import ServeBoard, SpecDecodeFigures
from warmgate.reconcile.sync.serving_state import ServingState

# Counters move with every request: one status write per object per 30 s at most.
MIN_WRITE_INTERVAL_S: Final = 30.0
DIGITS: Final = 4


@dataclass
class _Totals:
    """The counters summed over Pods; per-position accepted tokens (rate x drafts per Pod)."""

    drafts: int = 0
    draft_tokens: int = 0
    accepted_tokens: int = 0
    pods: int = 0
    positions: list[float] = field(default_factory=list)

    def add(self, counters: SpecDecodeFigures) -> None:
        drafts = counters.drafts
        self.drafts += drafts
        self.draft_tokens += counters.draft_tokens
        self.accepted_tokens += counters.accepted_tokens
        self.pods += 1
        rates = counters.per_position_acceptance_rate[:MAX_DRAFT_POSITIONS]
        for i, rate in enumerate(rates):
            if len(self.positions) <= i:
                self.positions.append(0.0)
            self.positions[i] += rate * drafts


def measured(docs: Iterable[ServeBoard], at: datetime) -> SpecDecodeAcceptance | None:
    """The sum over the Pods' counters and its two figures; None when no Pod has any.

    e.g. Pod a: 100 drafts, 200 draft tokens, 150 accepted; Pod b: 50, 100, 0 -> 150 drafts,
    300 tokens, 150 accepted: acceptance rate 0.5, mean acceptance length 1 + 150/150 = 2.0.
    """
    totals = _Totals()
    for doc in docs:
        if doc.spec_decode is not None:
            totals.add(doc.spec_decode)
    if totals.pods == 0:
        return None
    rate = totals.accepted_tokens / totals.draft_tokens if totals.draft_tokens else None
    length = 1 + totals.accepted_tokens / totals.drafts if totals.drafts else None
    drafts = totals.drafts
    positions = [round(p / drafts, DIGITS) for p in totals.positions] if drafts else []
    return SpecDecodeAcceptance(
        acceptance_rate=round(min(rate, 1.0), DIGITS) if rate is not None else None,
        mean_acceptance_length=round(length, DIGITS) if length is not None else None,
        per_position_acceptance_rate=positions or None,
        drafts=totals.drafts,
        draft_tokens=totals.draft_tokens,
        accepted_tokens=totals.accepted_tokens,
        pods=totals.pods,
        update_time=at,
    )


def evaluate_acceptance(
    old: SpecDecodeAcceptance | None,
    docs: Iterable[ServeBoard],
    *,
    same_plan: bool,
    at: datetime,
) -> SpecDecodeAcceptance | None:
    """The record to write: the new reading, or the old one while it is recent.

    ``same_plan``: the served plan is the one the old record measured. Another plan's record
    is dropped (its k or draft may differ); with no reading this sync the old one stays.
    """
    kept = old if same_plan else None
    new = measured(docs, at)
    if new is None:
        return kept
    if kept is None or kept.update_time is None:
        return new
    recent = (at - kept.update_time).total_seconds() < MIN_WRITE_INTERVAL_S
    return kept if recent else new


def with_acceptance(
    serving: ServingState | None,
    old: ServingSummary | None,
    docs: Iterable[ServeBoard],
    *,
    unread: bool,
    at: datetime,
) -> ServingState | None:
    """The serving state with the engines' measured spec-decode acceptance (status.serving
    .specDecode) from the served plan's boards ``docs`` (`decide._served_docs`, as for the
    drift); the record ``old`` keeps stays when the serving Pods could not be read
    (``unread``), and goes when another plan is served."""
    if serving is None:
        return None
    kept = old.spec_decode if old else None
    served = serving.summary.plan_hash
    if unread:
        measured_now = kept
    else:
        same_plan = served is not None and old is not None and old.plan_hash == served
        measured_now = evaluate_acceptance(kept, docs, same_plan=same_plan, at=at)
    summary = serving.summary.model_copy(update={"spec_decode": measured_now})
    return replace(serving, summary=summary)
