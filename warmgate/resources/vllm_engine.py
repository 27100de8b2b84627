"""The one engine definition warmup and serving share: the vLLM command, flags and environment."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any, Final

from warmgate.api import Manifest, SpecDecodeDeployment, engine_shape_config
from warmgate.buckets import BucketOverrides, BucketPlan, EngineShapeConfig
from warmgate.contract.order import EngineLaunch
from warmgate.resources.mounts import WEIGHTS_DIR

ENGINE_COMMAND: Final = ("vllm", "serve")
# The warmup engine answers the runner's probe on loopback; serving listens on all interfaces.
WARMUP_HOST: Final = "127.0.0.1"
SERVING_HOST: Final = "0.0.0.0"


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


@dataclass(frozen=True)
class Engine:
    """One SpecDecodeDeployment's engine, as the planner and the Pods both see it: the shape
    config the bucket plan is computed from, and the launch that runs a plan."""

    sdd: SpecDecodeDeployment

    @property
    def shape(self) -> EngineShapeConfig:
        """The planner's engine inputs (`warmgate.api.engine_shape_config`)."""
        return engine_shape_config(self.sdd)

    def launch(self, plan: BucketPlan) -> EngineLaunch:
        """How the warmup runner starts the engine for ``plan`` (`engine_launch`)."""
        return engine_launch(self.sdd, plan)


def engine_of(sdd: SpecDecodeDeployment) -> Engine:
    """The one engine definition of a spec: what it plans with and how it starts."""
    return Engine(sdd)


def engine_launch(sdd: SpecDecodeDeployment, plan: BucketPlan) -> EngineLaunch:
    """How the warmup runner starts the engine: the runner's own typed `engine` section.

    Serving runs the same definition on another address and with the KV block count the
    warmup measured (``serving_launch``), so both pods start one engine by construction.
    """
    return EngineLaunch(
        command=ENGINE_COMMAND,
        model=model_argument(sdd),
        served_model_name=sdd.spec.model.name,
        host=WARMUP_HOST,
        port=sdd.spec.serving.port,
        tensor_parallel_size=sdd.spec.engine.tensor_parallel_size,
        max_model_len=sdd.spec.engine.max_model_len,
        speculative_config=speculative_config(sdd),
        num_gpu_blocks_override=plan.config.num_gpu_blocks,
        args=tuple(engine_args(sdd)),
        env={**bucket_env(plan.config), **literal_env(sdd)},
    )


def container_env(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """Container env both pods carry: the HF token (only where the engine downloads from the
    Hub) and spec.engine.env's valueFrom entries."""
    env: list[Manifest] = []
    ref = sdd.spec.model.token_secret_ref
    if ref is not None and downloads_from_hub(sdd):
        secret = {"name": ref.name, "key": ref.key}
        env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": secret}})
    return env + env_from(sdd)


def downloads_from_hub(sdd: SpecDecodeDeployment) -> bool:
    """Whether the engine fetches a model from the Hugging Face Hub: the target without a
    weights claim, or a draft model named by a Hub id rather than a path. Without a download
    the Pods get no token (issue 23 item 14): the serving Pods run for weeks and answer
    requests, and a token in their environment is readable by whatever runs in them."""
    if sdd.spec.model.weights is None:
        return True
    draft = sdd.spec.speculative.draft_model
    return draft is not None and not draft.name.startswith("/")


def env_from(sdd: SpecDecodeDeployment) -> list[Manifest]:
    """spec.engine.env entries with valueFrom: resolved by the kubelet, never in the plan file."""
    return [
        {"name": e.name, "valueFrom": dict(e.value_from)}
        for e in sdd.spec.engine.env or ()
        if e.value_from is not None
    ]
