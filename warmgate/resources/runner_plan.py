"""The warmup runner's plan document (format v1): what to warm, verify, probe and cache.

The operator builds the runner's own types (`warmgate.contract.order.WarmupOrder` and its parts),
and plan.json is their `to_json()`: one definition of every field for both sides.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Final

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import BucketPlan
from warmgate.buckets.engine.methods import DRAFT_MODEL_METHODS
from warmgate.contract.drafterwarm import DrafterWarmupSpec
from warmgate.contract.order import (
    CACHE_NAMESPACE,
    CACHE_USERS,
    BucketSpec,
    CacheSpec,
    CacheUsers,
    EngineLaunch,
    ListExpectation,
    Timeouts,
    WarmupOrder,
    bucket_digest,
)
from warmgate.contract.sweepplan import Graph, HookSpec, SweepSpec
from warmgate.resources.mounts import CACHE_DIR, RECIPE_DIR, WORK_DIR
from warmgate.resources.names import parent_name
from warmgate.resources.probe_workload import probe_section

TERMINATION_LOG: Final = "/dev/termination-log"
# The sweep's deadline is its budget with this margin: its steps are sized by estimates.
SWEEP_MARGIN: Final = 1.5
# plan.json's cache.users: who uses the volume's entries, for the runner's prune; and
# cache.namespace, the namespace those users were listed in, which the runner writes into each
# manifest it publishes (a volume shared across namespaces: another namespace's entries are
# never judged by this one's list). Neither is part of the Job's content hash
# (warmup_children.build_warmup), so no Job made before them gets a new name.
OUTSIDE_CONTENT: Final = (CACHE_USERS, CACHE_NAMESPACE)


def _expected(plan: BucketPlan) -> dict[str, ListExpectation]:
    """Counts and digests with the runner's own algorithm (docs/runner.md, "Digests")."""
    lists = {
        "prompt": plan.prompt_buckets,
        "seed_decode": plan.seed_decode_buckets,
        "decode": plan.decode_buckets,
    }
    return {n: ListExpectation(len(rows), bucket_digest(rows)) for n, rows in lists.items()}


def _timeouts(sdd: SpecDecodeDeployment, sweep: SweepSpec | None) -> Timeouts:
    """Runner deadlines inside the Pod's activeDeadlineSeconds, so the runner ends first and
    still writes its report: 95 % of it, split facts 10 % / probe 25 % / stop 5 % (capped).
    A drafter sweep gets its budget (at most 15 % of the attempt, drafter_plan.sweep_budget)
    times SWEEP_MARGIN, and the probe its estimate again for replaying it; the engine's
    start-up and warmup keep the rest."""
    total = sdd.spec.warmup.timeout_seconds * 0.95
    facts = min(300.0, total * 0.1)
    probe = min(1800.0, total * 0.25)
    grace = min(60.0, total * 0.05)
    swept = None
    if sweep is not None:
        swept = max(1.0, float(sweep.budget_s) * SWEEP_MARGIN)
        probe += float(sweep.seconds[1])
    startup = max(1.0, total - facts - probe - grace - (swept or 0.0))
    return Timeouts(
        total_s=total,
        facts_s=facts,
        startup_s=startup,
        probe_s=probe,
        stop_grace_s=grace,
        sweep_s=swept,
    )


def _drafter(
    sdd: SpecDecodeDeployment, sweep: SweepSpec | None
) -> tuple[HookSpec, SweepSpec | None]:
    """The compile hook and the sweep, for methods with a draft model whose graphs the planner
    models (a sweep, possibly without steps); without one the hook stays off: every drafter
    graph would compile in the probe (docs/runner.md), and the operator refuses such a plan
    unless spec.warmup.drafter.verification is BestEffort (planning.py).

    Fail closed (issue 33): with verification Required (the default) the hook is required, so
    a run whose hook could not see the drafter (not loaded, proposer not found, metric
    unreadable) ends ``drafter_unverified``. A planned drafter graph never reached is a named,
    counted gap instead of a failed warmup with BestEffort, or with complete: false, which
    accepts uncovered shapes (issue 25)."""
    speculative = sdd.spec.speculative
    drafts = speculative.method in DRAFT_MODEL_METHODS and speculative.num_speculative_tokens > 0
    best_effort = sdd.spec.warmup.drafter.verification == "BestEffort"
    enabled = drafts and sweep is not None
    hook = HookSpec(
        enabled=enabled,
        required=enabled and not best_effort,
        accept_missing=not sdd.spec.buckets.coverage.complete or (enabled and best_effort),
    )
    return hook, sweep if drafts else None


def direct_warmup(
    sdd: SpecDecodeDeployment, sweep: SweepSpec | None, spec: DrafterWarmupSpec | None
) -> DrafterWarmupSpec | None:
    """The drafter warmup document the engine plugin gets, in the warmup Job and in every
    serving Pod (issue 33): the bundle's, whenever the compile hook runs (it carries the plugin
    into the engine)."""
    hook, _ = _drafter(sdd, sweep)
    return spec if hook.enabled else None


def build_runner_plan(
    sdd: SpecDecodeDeployment,
    plan: BucketPlan,
    *,
    key: str,
    engine: EngineLaunch,
    sweep: SweepSpec | None = None,
    known_unwarmable: Sequence[Graph] = (),
    users: CacheUsers | None = None,
    drafter_warmup: DrafterWarmupSpec | None = None,
) -> WarmupOrder:
    """The runner's plan, exactly as `warmgate.contract.order` reads it back (`to_json()` is
    plan.json); ``sweep`` is the drafter sweep (``PlanBundle.drafter_sweep``),
    ``known_unwarmable`` the shapes the runner reports as known gaps
    (``PlanBundle.known_unwarmable``), ``users`` who uses the claim's entries
    (``PlanBundle.cache_users``), ``drafter_warmup`` every drafter shape the engine plugin warms
    directly (``PlanBundle.drafter_warmup``; only with the hook, which carries it into the
    engine). ``plan_hash`` is the reader's digest of the text: empty here."""
    hook, drafter_sweep = _drafter(sdd, sweep)
    direct = direct_warmup(sdd, sweep, drafter_warmup)
    return WarmupOrder(
        plan_id=f"{parent_name(sdd)}-{plan.digest[:12]}",
        engine=engine,
        buckets=BucketSpec(
            # Seeds only: the engine expands decode seeds by 1+k itself (§2.6).
            seed_file_text=plan.to_bucket_file(),
            expected=_expected(plan),
            abort_on_mismatch=True,
            known_unwarmable=tuple(known_unwarmable),
        ),
        kv_blocks_expected=plan.config.num_gpu_blocks,
        cache=CacheSpec(
            volume_dir=Path(CACHE_DIR),
            key=key,
            local_dir=Path(RECIPE_DIR),
            size_mb=sdd.spec.warmup.cache.max_size_mb,
            reuse_existing=True,
            # Entries are published per owner; the runner keeps this object's newest ones.
            owner=sdd.metadata.uid,
            retain=sdd.spec.warmup.cache.retain_entries,
            users=users,
            namespace=sdd.metadata.namespace or None,
        ),
        probe=probe_section(sdd, plan, sweep),
        timeouts=_timeouts(sdd, sweep),
        report_dir=Path(f"{CACHE_DIR}/reports"),
        termination_log=Path(TERMINATION_LOG),
        work_dir=Path(WORK_DIR),
        require_device=True,
        plan_hash="",
        drafter_sweep=drafter_sweep,
        drafter_hook=hook,
        drafter_warmup=direct,
        # Only when the spec opts in: other plans, and their hashes, stay as they were.
        accept_cpu_engine=sdd.spec.engine.accept_cpu_engine,
    )
