"""Pure builders: spec + plan + settings -> the Job, Deployment, ConfigMap, claim and Service."""

from warmgate.resources.cache_key import cache_key
from warmgate.resources.children import Children, desired_children
from warmgate.resources.names import MAX_NAME, child_name, labels, owner_reference
from warmgate.resources.plan_bundle import PlanBundle
from warmgate.resources.serving_children import serving_name, serving_selector
from warmgate.resources.warmup_children import job_name

__all__ = [
    "MAX_NAME",
    "Children",
    "PlanBundle",
    "cache_key",
    "child_name",
    "desired_children",
    "job_name",
    "labels",
    "owner_reference",
    "serving_name",
    "serving_selector",
]
