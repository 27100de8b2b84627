"""Every child of a SpecDecodeDeployment for one plan: a pure function of spec, plan, settings."""

from __future__ import annotations

from dataclasses import dataclass

from warmgate.api import Manifest, SpecDecodeDeployment
from warmgate.contract.drafterwarm import DrafterWarmupSpec
from warmgate.resources.cache_claim import build_cache_claim
from warmgate.resources.cache_key import cache_key
from warmgate.resources.plan_bundle import PlanBundle
from warmgate.resources.runner_plan import build_runner_plan, direct_warmup
from warmgate.resources.serving_children import (
    build_service,
    build_serving_deployment,
    serving_launch,
)
from warmgate.resources.vllm_engine import engine_of
from warmgate.resources.warmup_children import build_plan_configmap, build_warmup
from warmgate.resources.warmup_shards import planned_shards, sharded_warmup
from warmgate.settings import Settings


@dataclass(frozen=True)
class Children:
    """The manifests the operator wants for one plan, and the cache key they share.

    ``plan_configmap`` holds the seed file (one per cache key, mounted by serving);
    ``warmup_configmap`` holds plan.json and is named like ``warmup_job`` after their content.
    """

    cache_key: str
    runner_plan: Manifest
    cache_claim: Manifest | None
    plan_configmap: Manifest
    warmup_configmap: Manifest
    warmup_job: Manifest
    serving_deployment: Manifest
    service: Manifest

    @property
    def warmup(self) -> tuple[Manifest, ...]:
        """The children a warmup needs, in the order they are created (the Job last)."""
        claim = (self.cache_claim,) if self.cache_claim is not None else ()
        return (*claim, self.plan_configmap, self.warmup_configmap, self.warmup_job)


def _direct(sdd: SpecDecodeDeployment, plan: PlanBundle) -> DrafterWarmupSpec | None:
    return direct_warmup(sdd, plan.drafter_sweep, plan.drafter_warmup)


def desired_children(sdd: SpecDecodeDeployment, plan: PlanBundle, settings: Settings) -> Children:
    """Every child of ``plan``: the cache key, runner plan and engine are computed once here.

    Nothing is read from the object's status: the same spec, plan and settings always give the
    same manifests. Raises ValueError for a plan its children cannot carry (e.g. plan files
    over a ConfigMap's 1 MiB, or buckets no seed file can express).
    """
    buckets = plan.buckets
    key = cache_key(sdd, buckets)
    warmup_engine = engine_of(sdd).launch(buckets)
    order = build_runner_plan(
        sdd,
        buckets,
        key=key,
        engine=warmup_engine,
        sweep=plan.drafter_sweep,
        known_unwarmable=plan.known_unwarmable,
        users=plan.cache_users,
        drafter_warmup=plan.drafter_warmup,
    )
    shards = planned_shards(sdd, buckets, plan.shards)
    sharded = sharded_warmup(order, buckets, shards) if shards > 1 else None
    runner_plan = (sharded.merge if sharded is not None else order).to_json()
    image = settings.operator_image
    warmup = build_warmup(
        sdd,
        buckets,
        key=key,
        runner_plan=runner_plan,
        operator_image=image,
        cache_claim_uid=plan.cache_claim_uid,
        cache_claim=plan.cache_claim_name,
        shard_plans=sharded.files() if sharded is not None else None,
    )
    return Children(
        cache_key=key,
        runner_plan=runner_plan,
        # A claim of an earlier build in use (PlanBundle.cache_claim_name): none to create.
        cache_claim=build_cache_claim(sdd) if plan.cache_claim_name is None else None,
        plan_configmap=build_plan_configmap(
            sdd, buckets, key=key, drafter_warmup=_direct(sdd, plan)
        ),
        warmup_configmap=warmup.configmap,
        warmup_job=warmup.job,
        serving_deployment=build_serving_deployment(
            sdd, plan, key=key, launch=serving_launch(plan, warmup_engine), operator_image=image
        ),
        service=build_service(sdd),
    )
