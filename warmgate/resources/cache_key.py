"""The recipe-cache key: the identity of a warmed plan on one software stack and device."""

from __future__ import annotations

import hashlib
import json
from typing import Final

from warmgate.api import SpecDecodeDeployment
from warmgate.api.constants import ANNOTATION_REWARM
from warmgate.buckets import BucketPlan
from warmgate.buckets.engine.methods import DRAFT_MODEL_METHODS
from warmgate.resources.vllm_engine import (
    bucket_env,
    engine_args,
    env_from,
    literal_env,
    speculative_config,
)

CACHE_KEY_VERSION: Final = "warmgate-cache-key-v1"


def cache_key(sdd: SpecDecodeDeployment, plan: BucketPlan) -> str:
    """The recipe-cache key: `<device>-tp<N>-<40 hex>` over the stack identity and the plan.

    Hashed (field.md §4 item 4; bucketing reference §4.6 lists what invalidates recipes): the
    image (PyTorch, Gaudi software, vllm-gaudi versions), device generation, TP size, dtype,
    vllm-gaudi profile, spec method, k and the draft model, the model name and revision, the
    pinned KV block count, the engine flags and environment, and the plan digest (the bucket
    set), spec.engine.acceptCPUEngine when set, and spec.warmup.drafter.verification when it is
    BestEffort for a draft-model method (its verdict may stand without drafter evidence, so it is
    never a Required plan's record). Replica count, placement, resources and
    timeouts are not in it: they change no graph.
    The `warmgate.dev/rewarm` annotation's value is, when set: a re-warm asked for by the user
    starts from an empty cache entry, and serving rolls to it once it is verified.
    """
    spec = sdd.spec
    identity = {
        "v": CACHE_KEY_VERSION,
        "image": spec.image,
        "device": spec.device,
        "tensor_parallel_size": spec.engine.tensor_parallel_size,
        "dtype": spec.engine.dtype,
        "profile": spec.engine.profile,
        "model": [spec.model.name, spec.model.revision],
        "speculative": speculative_config(sdd),
        "kv_blocks": plan.config.num_gpu_blocks,
        "engine": [engine_args(sdd), bucket_env(plan.config), literal_env(sdd)],
        "engine_env_from": env_from(sdd),
        "plan": plan.digest,
    }
    if spec.engine.accept_cpu_engine:  # a CPU engine's verdict is never a Gaudi plan's record
        identity["accept_cpu_engine"] = True
    drafts = spec.speculative.method in DRAFT_MODEL_METHODS
    if drafts and spec.warmup.drafter.verification == "BestEffort":
        identity["drafter_verification"] = "BestEffort"
    rewarm = (sdd.metadata.annotations or {}).get(ANNOTATION_REWARM)
    if rewarm is not None:
        identity["rewarm"] = rewarm
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
    return f"{spec.device}-tp{spec.engine.tensor_parallel_size}-{digest}"


def key_hash(key: str) -> str:
    """The hex part of a cache key, `gaudi2-tp1-3f2a9c0d41...` -> `3f2a9c0d41...`."""
    return key.rsplit("-", 1)[-1]
