"""Pure builders: CR + plan -> Job / Deployment / ConfigMap / Service manifests."""

from warmgate.resources.names import MAX_NAME, child_name, labels, owner_reference
from warmgate.resources.serving_children import (
    build_service,
    build_serving_deployment,
    serving_name,
    serving_selector,
)
from warmgate.resources.vllm_engine import cache_key
from warmgate.resources.warmup_children import (
    build_cache_pvc,
    build_plan_configmap,
    build_runner_plan,
    build_warmup_job,
)

__all__ = [
    "MAX_NAME",
    "build_cache_pvc",
    "build_plan_configmap",
    "build_runner_plan",
    "build_service",
    "build_serving_deployment",
    "build_warmup_job",
    "cache_key",
    "child_name",
    "labels",
    "owner_reference",
    "serving_name",
    "serving_selector",
]
