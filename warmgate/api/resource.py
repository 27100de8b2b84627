"""The SpecDecodeDeployment object, its spec-wide rules, and loading it from a YAML manifest."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import ConfigDict, Field, ValidationError

from warmgate.api.base import ApiModel, Rule
from warmgate.api.bucketing import BucketsSpec
from warmgate.api.constants import API_VERSION, KIND
from warmgate.api.kube import Resources
from warmgate.api.status import SpecDecodeDeploymentStatus
from warmgate.api.vllm_spec import EngineSpec, ModelSpec, SpeculativeSpec
from warmgate.api.workload import ServingSpec, WarmupSpec

Device = Literal["gaudi2", "gaudi3"]
# The Pod Security Standards profiles the warmup and serving Pods can be built to meet.
PodSecurity = Literal["restricted", "baseline"]
# The user of the warmup and serving Pods under "restricted" without spec.runAsUser: a numeric,
# non-root id, so the kubelet can check runAsNonRoot whatever user the image names.
DEFAULT_RUN_AS_USER = 1000
# A container image reference, [registry[:port]/]path[:tag][@algorithm:digest], after the
# grammar of github.com/distribution/reference (regexp.go; IPv6 registries left out). No
# backslash: the same text is a CEL string, a Go RE2 and a Python regex.
_DOMAIN_PART = "([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_PATH_PART = "[a-z0-9]+(([._]|__|[-]+)[a-z0-9]+)*"
IMAGE_REFERENCE = (
    f"^({_DOMAIN_PART}([.]{_DOMAIN_PART})*(:[0-9]+)?/)?{_PATH_PART}(/{_PATH_PART})*"
    "(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?"
    "(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)


def _gaudi_rule(section: str) -> Rule:
    """resources.limits['habana.ai/gaudi'], when written, must equal the TP size."""
    limits = f"self.{section}.resources.limits"
    return Rule(
        cel=(
            f"!has(self.{section}) || !has(self.{section}.resources) || "
            f"!has({limits}) || !('habana.ai/gaudi' in {limits}) || "
            f"string({limits}['habana.ai/gaudi']) == string(self.engine.tensorParallelSize)"
        ),
        message=f"{section}.resources.limits['habana.ai/gaudi'] must equal "
        "engine.tensorParallelSize",
        check=lambda s: _gaudi_ok(getattr(s, section).resources, s.engine.tensor_parallel_size),
        field_path=f".{section}.resources.limits",
    )


def _gaudi_ok(resources: Resources | None, tp: int) -> bool:
    count = resources.gaudi_count() if resources else None
    return count is None or str(count) == str(tp)


def _seeds_fit(spec: SpecDecodeDeploymentSpec) -> bool:
    seeds, engine = spec.buckets.seeds, spec.engine
    if seeds is None:
        return True
    prompt_ok = all(b * q <= engine.max_num_batched_tokens for b, q, _ in seeds.prompt)
    return prompt_ok and all(b <= engine.max_num_seqs for b, _, _ in seeds.decode)


class SpecDecodeDeploymentSpec(ApiModel):
    """Desired state: a vLLM-Gaudi spec-decode deployment, planned, proven and warmed."""

    model: ModelSpec = Field(description="The target model.")
    image: str = Field(
        min_length=1, max_length=512, description="The vLLM-Gaudi container image (pin a digest)."
    )
    device: Device = Field(description="Gaudi generation of the nodes: gaudi2 or gaudi3.")
    engine: EngineSpec = Field(description="vLLM engine arguments that fix the shape space.")
    speculative: SpeculativeSpec = Field(description="Speculative decoding method and k.")
    buckets: BucketsSpec = Field(
        default_factory=BucketsSpec, description="Bucketing knobs, seeds and coverage policy."
    )
    warmup: WarmupSpec = Field(default_factory=WarmupSpec, description="The warmup Job.")
    serving: ServingSpec = Field(default_factory=ServingSpec, description="Serving workload.")

    pod_security: PodSecurity = Field(
        default="restricted",
        description=(
            "The Pod Security profile the warmup and serving Pods meet. restricted (the "
            "default): every container runs as a non-root numeric user (runAsUser, default "
            f"{DEFAULT_RUN_AS_USER}), drops every capability, without privilege escalation, with "
            "the RuntimeDefault seccomp profile; the vLLM image and the node's Gaudi device "
            "files must allow that user. baseline: the image's own user (root in the vLLM-Gaudi "
            "images known) and the runtime's default capabilities, for images that need them."
        ),
    )
    run_as_user: int | None = Field(
        default=None,
        ge=1,
        le=2147483647,
        description=(
            "The non-root user id (and fsGroup) every container of the warmup and serving Pods "
            f"runs as. Unset: {DEFAULT_RUN_AS_USER} under podSecurity restricted, the image's "
            "own user under baseline."
        ),
    )

    cel_rules = (
        Rule(
            cel=f"self.image.matches('{IMAGE_REFERENCE}')",
            message=(
                "image must be a container image reference without spaces: "
                "[registry[:port]/]name[:tag][@sha256:digest], lowercase name"
            ),
            check=lambda s: re.fullmatch(IMAGE_REFERENCE, s.image) is not None,
            field_path=".image",
        ),
        Rule(
            cel=(
                "!has(self.buckets) || !has(self.buckets.seeds) || "
                "(self.buckets.seeds.prompt.all(t, size(t) != 3 || "
                "t[0] * t[1] <= self.engine.maxNumBatchedTokens) && "
                "self.buckets.seeds.decode.all(t, size(t) != 3 || t[0] <= self.engine.maxNumSeqs))"
            ),
            message=(
                "buckets.seeds must fit the engine: prompt batchSize*queryLen <= "
                "engine.maxNumBatchedTokens and decode batchSize <= engine.maxNumSeqs"
            ),
            check=_seeds_fit,
            field_path=".buckets.seeds",
        ),
        Rule(
            cel=(
                "!has(self.speculative.draftModel) || "
                "!has(self.speculative.draftModel.tensorParallelSize) || "
                "self.speculative.draftModel.tensorParallelSize == 1 || "
                "self.speculative.draftModel.tensorParallelSize == self.engine.tensorParallelSize"
            ),
            message="speculative.draftModel.tensorParallelSize must be 1 or "
            "engine.tensorParallelSize",
            check=lambda s: (
                s.speculative.draft_model is None
                or s.speculative.draft_model.tensor_parallel_size
                in (None, 1, s.engine.tensor_parallel_size)
            ),
            field_path=".speculative.draftModel.tensorParallelSize",
        ),
        Rule(
            # The planner sizes contiguous-PA decode buckets from the KV block count, and it
            # plans before any Gaudi Pod could measure it.
            cel=(
                "!has(self.buckets) || !self.buckets.contiguousPA || has(self.engine.numGpuBlocks)"
            ),
            message="engine.numGpuBlocks is required when buckets.contiguousPA is true",
            check=lambda s: not s.buckets.contiguous_pa or s.engine.num_gpu_blocks is not None,
            field_path=".engine.numGpuBlocks",
            reason="FieldValueRequired",
        ),
        _gaudi_rule("warmup"),
        _gaudi_rule("serving"),
    )


class ObjectMeta(ApiModel):
    """The metadata fields warmgate reads; the apiserver owns and validates the rest."""

    model_config = ConfigDict(extra="allow")

    name: str | None = Field(default=None, description="Object name.")
    namespace: str | None = Field(default=None, description="Object namespace.")
    generation: int | None = Field(default=None, description="Spec generation.")
    uid: str | None = Field(default=None, description="Object UID.")
    labels: dict[str, str] | None = Field(default=None, description="Labels.")
    annotations: dict[str, str] | None = Field(default=None, description="Annotations.")


class SpecDecodeDeployment(ApiModel):
    """A vLLM-Gaudi speculative-decoding deployment whose shapes are planned, proven and warmed."""

    api_version: Literal["warmgate.dev/v1alpha1"] = Field(
        default="warmgate.dev/v1alpha1", description=API_VERSION
    )
    kind: Literal["SpecDecodeDeployment"] = Field(default="SpecDecodeDeployment", description=KIND)
    metadata: ObjectMeta = Field(default_factory=ObjectMeta, description="Object metadata.")
    spec: SpecDecodeDeploymentSpec = Field(description="Desired state.")
    status: SpecDecodeDeploymentStatus | None = Field(default=None, description="Observed state.")


class ManifestError(ValueError):
    """A manifest that is not a valid SpecDecodeDeployment; the message names every bad field."""


def _location(loc: tuple[int | str, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        parts.append(f"[{item}]" if isinstance(item, int) else f".{item}")
    return "".join(parts).lstrip(".") or "(root)"


def format_errors(error: ValidationError) -> str:
    """One line per problem: `spec.engine.maxNumSeqs: Input should be ... (got 5000)`."""
    lines = []
    for item in error.errors(include_url=False):
        got = "" if item["type"] == "missing" else f" (got {item['input']!r})"
        lines.append(f"{_location(item['loc'])}: {item['msg']}{got}")
    return "\n".join(lines)


def _is_file(text: str) -> bool:
    try:
        return "\n" not in text and Path(text).is_file()
    except OSError:  # e.g. one-line JSON longer than a file name may be
        return False


def _read(path_or_text: str | Path) -> str:
    if isinstance(path_or_text, Path) or _is_file(path_or_text):
        return Path(path_or_text).read_text(encoding="utf-8")
    return path_or_text


def _pick_document(text: str) -> dict[str, Any]:
    docs = [d for d in yaml.safe_load_all(text) if d is not None]
    ours = [d for d in docs if isinstance(d, dict) and d.get("kind") == KIND]
    if len(docs) == 1 and isinstance(docs[0], dict):
        return docs[0]
    if len(ours) != 1:
        raise ManifestError(f"expected exactly one {KIND} document, found {len(ours)}")
    return ours[0]


def parse_manifest(data: Mapping[str, Any]) -> SpecDecodeDeployment:
    """Validate an already-parsed manifest (for example a kopf body) into the model."""
    try:
        return SpecDecodeDeployment.model_validate(dict(data))
    except ValidationError as error:
        raise ManifestError(f"invalid {KIND}:\n{format_errors(error)}") from None


def load_manifest(path_or_text: str | Path) -> SpecDecodeDeployment:
    """Load a SpecDecodeDeployment from a file path or YAML text; raise ManifestError if invalid."""
    try:
        document = _pick_document(_read(path_or_text))
    except yaml.YAMLError as error:
        raise ManifestError(f"not valid YAML: {error}") from None
    return parse_manifest(document)
