"""The engine's command line and logging environment: what the operator and the runner both build.

Pure, and shared: the warmup runner starts the engine with them (`engine.launch`), and the
operator writes the same command into the serving Deployment (`resources.serving_children`),
so warmup and serving start one engine by construction.
"""

from __future__ import annotations

import json
from pathlib import Path

from warmgate.contract.order import EngineLaunch


def engine_command(spec: EngineLaunch) -> list[str]:
    """The command line of one engine definition (the serving Deployment runs this one too)."""
    argv = [*spec.command, spec.model, "--host", spec.host, "--port", str(spec.port)]
    argv += ["--served-model-name", spec.served_model_name]
    argv += ["--tensor-parallel-size", str(spec.tensor_parallel_size)]
    if spec.max_model_len is not None:
        argv += ["--max-model-len", str(spec.max_model_len)]
    if spec.speculative_config is not None:
        argv += ["--speculative-config", json.dumps(spec.speculative_config, sort_keys=True)]
    if spec.num_gpu_blocks_override is not None:
        # §2.1: pins num_hpu_blocks so warmup and serving generate the same decode shapes.
        argv += ["--num-gpu-blocks-override", str(spec.num_gpu_blocks_override)]
    return argv + list(spec.args)


def recipe_cache_config(local_dir: Path, reuse: bool, size_mb: int) -> str:
    """PT_HPU_RECIPE_CACHE_CONFIG=<dir>,<delete>,<MB> (§4.6); DELETE=False keeps restored ones."""
    return f"{local_dir},{'False' if reuse else 'True'},{size_mb}"


# vLLM's logging must print the lines the parser reads, whatever the image sets (vLLM v0.26.0):
# VLLM_CONFIGURE_LOGGING=0 drops vLLM's handler, so INFO records vanish and no process prefix
# is written (vllm/logger.py:167-201, vllm/utils/system_utils.py:242-243); a level above INFO
# hides the bucket lists, "Usable num_blocks" and "Warmup finished" (logger.py:59-66); a config
# file replaces the format (logger.py:179-193); NO_COLOR and VLLM_LOGGING_COLOR=0 keep ANSI
# colour out of the prefix and the records (system_utils.py:204-211, logger.py:29-38). The
# parser still strips colour and prefixes for engines that ignore these.
LOGGING_ENV = {
    "VLLM_CONFIGURE_LOGGING": "1",
    "VLLM_LOGGING_LEVEL": "INFO",
    "VLLM_LOGGING_PREFIX": "",
    "VLLM_LOGGING_STREAM": "ext://sys.stdout",
    "VLLM_LOGGING_COLOR": "0",
    "NO_COLOR": "1",
}
LOGGING_ENV_REMOVED = ("VLLM_LOGGING_CONFIG_PATH",)
