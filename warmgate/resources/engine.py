"""The one engine definition warmup and serving share: vLLM flags, environment and cache key."""

from __future__ import annotations

import hashlib
import json
from pathlib import PurePosixPath
from typing import Any, Final

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import BucketOverrides, BucketPlan, EngineShapeConfig

Manifest = dict[str, Any]

# Mount points shared by the Job and the Deployment. The runner requires absolute folders at
# least two levels deep (docs/runner.md, plan fields), because it empties local_dir.
PLAN_DIR: Final = "/etc/warmgate"
PLAN_FILE: Final = "plan.json"
BUCKET_FILE: Final = "buckets.txt"
RUNNER_DIR: Final = "/warmgate/runner"
CACHE_DIR: Final = "/warmgate/cache"
LOCAL_DIR: Final = "/warmgate/local"
RECIPE_DIR: Final = f"{LOCAL_DIR}/recipe_cache"
WORK_DIR: Final = f"{LOCAL_DIR}/work"
WEIGHTS_DIR: Final = "/warmgate/weights"
ENGINE_COMMAND: Final = ("vllm", "serve")
CACHE_KEY_VERSION: Final = "warmgate-cache-key-v1"


def model_argument(sdd: SpecDecodeDeployment) -> str:
    """The positional model: the mounted weights folder when a claim holds them, else the id."""
    weights = sdd.spec.model.weights
    if weights is None:
        return sdd.spec.model.name
    return str(PurePosixPath(WEIGHTS_DIR) / weights.path.lstrip("/"))


def speculative_config(sdd: SpecDecodeDeployment) -> dict[str, Any]:
    """vLLM's --speculative-config JSON (method, k, draft model and its revision, n-gram window)."""
    spec = sdd.spec.speculative
    config: dict[str, Any] = {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
    }
    if spec.draft_model is not None:
        config["model"] = spec.draft_model.name
        config["revision"] = spec.draft_model.revision
        if spec.draft_model.tensor_parallel_size is not None:
            config["draft_tensor_parallel_size"] = spec.draft_model.tensor_parallel_size
    if spec.ngram is not None:
        for key in ("prompt_lookup_min", "prompt_lookup_max"):
            if (value := getattr(spec.ngram, key)) is not None:
                config[key] = value
    return config


def engine_args(sdd: SpecDecodeDeployment) -> list[str]:
    """The flags after the runner's pinned ones (docs/runner.md, "What the engine gets")."""
    engine, model = sdd.spec.engine, sdd.spec.model
    args = [] if model.weights is not None else ["--revision", model.revision]
    args += ["--dtype", engine.dtype]
    args += ["--max-num-seqs", str(engine.max_num_seqs)]
    args += ["--max-num-batched-tokens", str(engine.max_num_batched_tokens)]
    args += ["--block-size", str(engine.block_size)]
    args += ["--gpu-memory-utilization", str(engine.gpu_memory_utilization)]
    if engine.enable_prefix_caching is not None:
        on = engine.enable_prefix_caching
        args.append("--enable-prefix-caching" if on else "--no-enable-prefix-caching")
    return args + list(engine.extra_args or ())


def _flag(value: bool) -> str:
    return "true" if value else "false"


def bucket_env(config: EngineShapeConfig) -> dict[str, str]:
    """The bucketing variables the planner assumed (bucketing reference §2.2).

    The seed file replaces the strategy for both phases (§2.6), but contiguous PA and merged
    prefill still change how the engine reads it, and the rest is set so a process started
    without the file (e.g. by hand) still plans the same lists.
    """
    env = {
        "VLLM_BUCKETING_STRATEGY": config.strategy,
        "VLLM_CONTIGUOUS_PA": _flag(config.contiguous_pa),
        "VLLM_MERGED_PREFILL": _flag(config.merged_prefill),
        # Sliding-window FusedSDPA drops prompt buckets the planner keeps (vllm-gaudi
        # common.py:176-182); the API reserves it, so an image's ENV cannot turn it on.
        "PT_HPU_SDPA_QKV_SLICE_MODE_FWD": "false",
    }
    if config.prompt_bs_max is not None:
        env["VLLM_PROMPT_BS_BUCKET_MAX"] = str(config.prompt_bs_max)
    if config.prompt_ctx_bucket_max is not None:
        env["VLLM_PROMPT_CTX_BUCKET_MAX"] = str(config.prompt_ctx_bucket_max)
    if config.query_min_env is not None:
        env["VLLM_PROMPT_QUERY_BUCKET_MIN"] = str(config.query_min_env)
    overrides = config.overrides.model_dump(exclude_none=True) if config.overrides else {}
    for field, value in overrides.items():
        env[BucketOverrides.env_name(field)] = str(value)
    return env


def literal_env(sdd: SpecDecodeDeployment) -> dict[str, str]:
    """spec.engine.env entries with a literal value (valueFrom ones stay on the container)."""
    return {e.name: e.value or "" for e in sdd.spec.engine.env or () if e.value_from is None}


def engine_section(
    sdd: SpecDecodeDeployment, plan: BucketPlan, *, kv_blocks: int | None = None
) -> Manifest:
    """The runner plan's `engine` object; serving derives its command line from the same dict.

    ``kv_blocks`` pins --num-gpu-blocks-override when the plan does not (the count a warmup
    measured, docs/api.md "numGpuBlocks"); the plan's own count wins, as in the planner.
    """
    blocks = plan.config.num_gpu_blocks or kv_blocks
    return {
        "command": list(ENGINE_COMMAND),
        "model": model_argument(sdd),
        "served_model_name": sdd.spec.model.name,
        "host": "127.0.0.1",
        "port": sdd.spec.serving.port,
        "tensor_parallel_size": sdd.spec.engine.tensor_parallel_size,
        "max_model_len": sdd.spec.engine.max_model_len,
        "speculative_config": speculative_config(sdd),
        "num_gpu_blocks_override": blocks,
        "args": engine_args(sdd),
        "env": {**bucket_env(plan.config), **literal_env(sdd)},
    }


def container_env(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """Container env both pods carry: the HF token and spec.engine.env's valueFrom entries."""
    env: list[Manifest] = []
    ref = sdd.spec.model.token_secret_ref
    if ref is not None:
        secret = {"name": ref.name, "key": ref.key}
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": secret}})
    return env + env_from(sdd)


def env_from(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """spec.engine.env entries with valueFrom: resolved by the kubelet, never in the plan file."""
    return [
        {"name": e.name, "valueFrom": dict(e.value_from)}
        for e in sdd.spec.engine.env or ()
        if e.value_from is not None
    ]


def cache_key(sdd: SpecDecodeDeployment, plan: BucketPlan) -> str:
    """The recipe-cache key: `<device>-tp<N>-<40 hex>` over the stack identity and the plan.

    Hashed (field.md §4 item 4; bucketing reference §4.6 lists what invalidates recipes): the
    image (PyTorch, Gaudi software, vllm-gaudi versions), device generation, TP size, dtype,
    vllm-gaudi profile, spec method, k and the draft model, the model name and revision, the
    pinned KV block count, the engine flags and environment, and the plan digest (the bucket
    set). Replica count, placement, resources and timeouts are not in it: they change no graph.
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
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:40]
    return f"{spec.device}-tp{spec.engine.tensor_parallel_size}-{digest}"
