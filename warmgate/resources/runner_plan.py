"""The warmup runner's plan document (format v1): what to warm, verify, probe and cache."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.buckets import BucketPlan
from warmgate.buckets.engine.methods import DRAFT_MODEL_METHODS
from warmgate.resources.mounts import CACHE_DIR, RECIPE_DIR, WORK_DIR
from warmgate.resources.names import parent_name
from warmgate.resources.probe_workload import probe_section
from warmgate.resources.vllm_engine import EngineLaunch, engine_document
from warmgate.warmup.wire.plan import PLAN_FORMAT_VERSION, CacheUsers, bucket_digest

TERMINATION_LOG: Final = "/dev/termination-log"
# The sweep's deadline is its budget with this margin: its steps are sized by estimates.
SWEEP_MARGIN: Final = 1.5
# plan.json's cache.users: who uses the volume's entries, for the runner's prune; and
# cache.namespace, the namespace those users were listed in, which the runner writes into each
# manifest it publishes (a volume shared across namespaces: another namespace's entries are
# never judged by this one's list). Neither is part of the Job's content hash
# (warmup_children.build_warmup), so no Job made before them gets a new name.
USERS: Final = "users"
NAMESPACE: Final = "namespace"
OUTSIDE_CONTENT: Final = (USERS, NAMESPACE)


def users_section(users: CacheUsers | None) -> Manifest:
    """cache.users for the runner, or nothing."""
    return {} if users is None else {USERS: users.to_json()}


def _expected(plan: BucketPlan) -> Manifest:
    """Counts and digests with the runner's own algorithm (docs/runner.md, "Digests")."""
    lists = {
        "prompt": plan.prompt_buckets,
        "seed_decode": plan.seed_decode_buckets,
        "decode": plan.decode_buckets,
    }
    return {n: {"count": len(rows), "digest": bucket_digest(rows)} for n, rows in lists.items()}


def _timeouts(sdd: SpecDecodeDeployment, sweep: Manifest | None) -> Manifest:
    """Runner deadlines inside the Pod's activeDeadlineSeconds, so the runner ends first and
    still writes its report: 95 % of it, split facts 10 % / probe 25 % / stop 5 % (capped).
    A drafter sweep gets its budget (at most 15 % of the attempt, drafter_plan.sweep_budget)
    times SWEEP_MARGIN, and the probe its estimate again for replaying it; the engine's
    start-up and warmup keep the rest."""
    total = sdd.spec.warmup.timeout_seconds * 0.95
    facts = min(300.0, total * 0.1)
    probe = min(1800.0, total * 0.25)
    grace = min(60.0, total * 0.05)
    doc: Manifest = {"total_s": total, "facts_s": facts, "stop_grace_s": grace}
    if sweep is not None:
        doc["sweep_s"] = max(1.0, float(sweep["budget_s"]) * SWEEP_MARGIN)
        probe += float(sweep["seconds"][1])
    doc["probe_s"] = probe
    doc["startup_s"] = max(1.0, total - facts - probe - grace - doc.get("sweep_s", 0.0))
    return doc


def _drafter(sdd: SpecDecodeDeployment, sweep: Manifest | None) -> Manifest:
    """The sweep and the compile hook, for methods with a draft model whose graphs the planner
    models (a sweep document, possibly without steps); without one the hook stays off: every
    drafter graph would compile in the probe (docs/runner.md)."""
    speculative = sdd.spec.speculative
    drafts = speculative.method in DRAFT_MODEL_METHODS and speculative.num_speculative_tokens > 0
    hook: Manifest = {"enabled": drafts and sweep is not None, "required": False}
    if not sdd.spec.buckets.coverage.complete:
        # The user accepts uncovered shapes: a planned drafter graph the sweep never drives is a
        # counted gap, not a failed warmup (issue 25). Written only then: other plans unchanged.
        hook["accept_missing"] = True
    doc: Manifest = {"drafter_hook": hook}
    if drafts and sweep is not None:
        doc["drafter_sweep"] = sweep
    return doc


def build_runner_plan(
    sdd: SpecDecodeDeployment,
    plan: BucketPlan,
    *,
    key: str,
    engine: EngineLaunch,
    sweep: Manifest | None = None,
    known_unwarmable: Sequence[tuple[str, int, int, int]] = (),
    users: CacheUsers | None = None,
) -> Manifest:
    """The runner's plan document, format v1, exactly as `warmgate.warmup.wire.plan` validates it;
    ``sweep`` is the drafter sweep (``PlanToRun.drafter_sweep``), ``known_unwarmable`` the
    shapes the runner reports as known gaps (``PlanToRun.known_unwarmable``; written only when
    there are some), ``users`` who uses the claim's entries (``PlanToRun.cache_users``)."""
    known = {"known_unwarmable": [list(g) for g in known_unwarmable]} if known_unwarmable else {}
    return {
        "format_version": PLAN_FORMAT_VERSION,
        "plan_id": f"{parent_name(sdd)}-{plan.digest[:12]}",
        "engine": engine_document(engine),
        "buckets": {
            # Seeds only: the engine expands decode seeds by 1+k itself (§2.6).
            "seed_file_text": plan.to_bucket_file(),
            "expected": _expected(plan),
            "abort_on_mismatch": True,
            **known,
        },
        "kv_blocks_expected": plan.config.num_gpu_blocks,
        "cache": {
            "volume_dir": CACHE_DIR,
            "key": key,
            "local_dir": RECIPE_DIR,
            "size_mb": sdd.spec.warmup.cache.max_size_mb,
            "reuse_existing": True,
            # Entries are published per owner; the runner keeps this object's newest ones.
            "owner": sdd.metadata.uid,
            "retain": sdd.spec.warmup.cache.retain_entries,
            **({NAMESPACE: sdd.metadata.namespace} if sdd.metadata.namespace else {}),
            **users_section(users),
        },
        "probe": probe_section(sdd, plan, sweep),
        "timeouts": _timeouts(sdd, sweep),
        "report": {"dir": f"{CACHE_DIR}/reports", "termination_log": TERMINATION_LOG},
        "work_dir": WORK_DIR,
        "require_device": True,
        **_drafter(sdd, sweep),
        # Only when the spec opts in: other plans, and their hashes, stay as they were.
        **({"accept_cpu_engine": True} if sdd.spec.engine.accept_cpu_engine else {}),
    }
