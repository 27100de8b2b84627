"""The model size the warmup-time estimate assumes: the spec's, a known model's, or 8B.

The cost model (`warmgate.buckets.cost`) scales the per-graph compile time with the parameter
count. The spec may state it (`spec.model.parameters`); otherwise the count of a model whose
published configuration is known here is used; otherwise the cost model's 8B reference, and
the estimate says it assumed that. The model name is never parsed for a size: "Mixtral-8x7B"
has 46.7B parameters and "DeepSeek-V3" names none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from warmgate.api import SpecDecodeDeployment
from warmgate.buckets import ModelProfile

# Total parameters in billions, as the models' Hugging Face pages give them (safetensors
# totals), for the models of examples/ and their close relatives. A mixture of experts counts
# every expert: all of them are compiled into the graphs the warmup builds.
KNOWN_MODELS: Final[dict[str, float]] = {
    "meta-llama/llama-3.1-8b": 8.03,
    "meta-llama/llama-3.1-8b-instruct": 8.03,
    "meta-llama/llama-3.1-70b-instruct": 70.6,
    "meta-llama/llama-3.3-70b-instruct": 70.6,
    "qwen/qwen2.5-7b-instruct": 7.62,
    "mistralai/mixtral-8x7b-v0.1": 46.7,
    "mistralai/mixtral-8x7b-instruct-v0.1": 46.7,
    # 671B of the main model; the checkpoint adds the 14B MTP module (685B in all).
    "deepseek-ai/deepseek-v3": 671.0,
    "deepseek-ai/deepseek-r1": 671.0,
}


@dataclass(frozen=True)
class ModelSize:
    """A parameter count and where it came from, for the estimate's message."""

    params_b: float
    source: str

    @property
    def profile(self) -> ModelProfile:
        """What the cost model needs of the model (BF16 weights, the engine default)."""
        return ModelProfile(params_b=self.params_b)

    def describe(self) -> str:
        """e.g. "70.6B parameters (known model)"."""
        return f"{self.params_b:g}B parameters ({self.source})"


def model_size(sdd: SpecDecodeDeployment) -> ModelSize:
    """spec.model.parameters, else a known model's count, else the cost model's reference."""
    stated = sdd.spec.model.parameters_b
    if stated is not None:
        return ModelSize(stated, "spec.model.parameters")
    known = KNOWN_MODELS.get(sdd.spec.model.name.lower())
    if known is not None:
        return ModelSize(known, "known model")
    return ModelSize(ModelProfile().params_b, "assumed; set spec.model.parameters")
