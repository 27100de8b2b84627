"""The warmup runner's plan document (format v1): what to warm, verify, probe and cache."""

from __future__ import annotations

from typing import Final

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.buckets import BucketPlan
from warmgate.resources.mounts import CACHE_DIR, RECIPE_DIR, WORK_DIR
from warmgate.resources.names import parent_name
from warmgate.resources.probe_workload import probe_section
from warmgate.resources.vllm_engine import EngineLaunch, engine_document
from warmgate.warmup.plan import PLAN_FORMAT_VERSION, bucket_digest

TERMINATION_LOG: Final = "/dev/termination-log"


def _expected(plan: BucketPlan) -> Manifest:
    """Counts and digests with the runner's own algorithm (docs/runner.md, "Digests")."""
    lists = {
        "prompt": plan.prompt_buckets,
        "seed_decode": plan.seed_decode_buckets,
        "decode": plan.decode_buckets,
    }
    return {n: {"count": len(rows), "digest": bucket_digest(rows)} for n, rows in lists.items()}


def _timeouts(sdd: SpecDecodeDeployment) -> Manifest:
    """Runner deadlines inside the Pod's activeDeadlineSeconds, so the runner ends first and
    still writes its report: 95 % of it, split facts 10 % / probe 25 % / stop 5 % (capped)."""
    total = sdd.spec.warmup.timeout_seconds * 0.95
    facts = min(300.0, total * 0.1)
    probe = min(1800.0, total * 0.25)
    grace = min(60.0, total * 0.05)
    startup = total - facts - probe - grace
    return {
        "total_s": total,
        "facts_s": facts,
        "startup_s": startup,
        "probe_s": probe,
        "stop_grace_s": grace,
    }


def build_runner_plan(
    sdd: SpecDecodeDeployment, plan: BucketPlan, *, key: str, engine: EngineLaunch
) -> Manifest:
    """The runner's plan document, format v1, exactly as `warmgate.warmup.plan` validates it."""
    return {
        "format_version": PLAN_FORMAT_VERSION,
        "plan_id": f"{parent_name(sdd)}-{plan.digest[:12]}",
        "engine": engine_document(engine),
        "buckets": {
            # Seeds only: the engine expands decode seeds by 1+k itself (§2.6).
            "seed_file_text": plan.to_bucket_file(),
            "expected": _expected(plan),
            "abort_on_mismatch": True,
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
        },
        "probe": probe_section(sdd, plan),
        "timeouts": _timeouts(sdd),
        "report": {"dir": f"{CACHE_DIR}/reports", "termination_log": TERMINATION_LOG},
        "work_dir": WORK_DIR,
        "require_device": True,
    }
