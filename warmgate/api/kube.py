"""Small Kubernetes-shaped types the spec embeds: quantities, placement, resources, env, refs."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, StringConstraints, WithJsonSchema

from warmgate.api.base import ApiModel, Rule

# The pattern controller-gen emits for resource.Quantity (k8s.io/apimachinery/pkg/api/resource).
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
_QUANTITY_RE = re.compile(QUANTITY_PATTERN)
DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
STORAGE_SIZE = r"^[1-9][0-9]{0,8}(Mi|Gi|Ti)$"
ENV_NAME = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
# A qualified name (label and annotation keys, resource names): an optional DNS-subdomain
# prefix and "/", then a name of at most 63 characters (k8s.io/apimachinery
# pkg/util/validation/validation.go, IsQualifiedName). `[.]` instead of an escaped dot: the
# same text is a CEL string, a Go RE2 and a Python regex.
QUALIFIED_NAME = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
# A label value (IsValidLabelValue): empty, or at most 63 alphanumerics, '-', '_', '.' with
# alphanumeric ends.
LABEL_VALUE = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
# One word: no whitespace and no control character. Model ids, revisions and paths become
# single argv elements and Hub URLs; a space in them is always a mistake.
WORD = r"^[^\x00-\x20\x7f]+$"
# A ConfigMap or Secret key (IsConfigMapKey).
CONFIG_KEY = r"^[-._a-zA-Z0-9]+$"
GAUDI_RESOURCE = "habana.ai/gaudi"
# A Kubernetes object, or a part of one, as the plain JSON the API server reads and writes.
Manifest = dict[str, Any]


def _check_quantity(value: int | str) -> int | str:
    if isinstance(value, str) and (len(value) > 64 or not _QUANTITY_RE.match(value)):
        raise ValueError(f"{value!r} is not a Kubernetes quantity (e.g. 500m, 4Gi, 8)")
    return value


Quantity = Annotated[
    int | str,
    AfterValidator(_check_quantity),
    WithJsonSchema(
        {
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "maxLength": 64,
            "x-kubernetes-int-or-string": True,
        }
    ),
]
Name = Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=DNS_SUBDOMAIN)]
LabelValue = Annotated[str, StringConstraints(max_length=63, pattern=LABEL_VALUE)]
AnnotationValue = Annotated[str, StringConstraints(max_length=4096)]
# Map keys: the CRD cannot put a pattern on them (structural schemas have no propertyNames),
# so each map of qualified names carries a `keys_rule` instead.
MapKey = Annotated[str, StringConstraints(min_length=1, max_length=317)]
# An opaque Kubernetes object kept as the user wrote it (the apiserver validates it on the
# child Pod): x-kubernetes-preserve-unknown-fields in the CRD.
KubeObject = Annotated[
    dict[str, Any],
    WithJsonSchema({"type": "object", "x-kubernetes-preserve-unknown-fields": True}),
]


def keys_rule(field: str, what: str) -> Rule:
    """Every key of the map ``field`` is a qualified name (a label key, annotation key or
    resource name): refused at admission, not later when the API server refuses the child
    Pod, Job or Deployment the operator builds from it."""
    return Rule(
        cel=f"!has(self.{field}) || self.{field}.all(k, k.matches('{QUALIFIED_NAME}'))",
        message=f"{field} keys must be {what}: [prefix/]name, the name at most 63 "
        "alphanumerics, '-', '_' or '.' with alphanumeric ends",
        check=lambda s: all(re.match(QUALIFIED_NAME, k) for k in getattr(s, _snake(field)) or {}),
        field_path=f".{field}",
    )


def _snake(camel: str) -> str:
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), camel)


class SecretKeyRef(ApiModel):
    """A key of a Secret in the SpecDecodeDeployment's namespace."""

    name: Name = Field(description="Name of the Secret.")
    key: Annotated[str, StringConstraints(min_length=1, max_length=253, pattern=CONFIG_KEY)] = (
        Field(default="token", description="Key inside the Secret whose value is used.")
    )


class Toleration(ApiModel):
    """A Pod toleration (core/v1 Toleration)."""

    key: Annotated[str, StringConstraints(max_length=317, pattern=QUALIFIED_NAME)] | None = Field(
        default=None, description="Taint key the toleration applies to; empty matches all keys."
    )
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal", description="Exists matches any value; Equal needs `value`."
    )
    value: LabelValue | None = Field(default=None, description="Taint value to match.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="Taint effect to match; empty matches all effects."
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        description="How long a NoExecute taint is tolerated before eviction; unset is forever.",
    )


class Placement(ApiModel):
    """Where the Pods run: node selector, tolerations and affinity, as on a PodSpec."""

    node_selector: dict[MapKey, LabelValue] | None = Field(
        default=None, max_length=32, description="Node labels the Pods require."
    )
    tolerations: list[Toleration] | None = Field(
        default=None, max_length=32, description="Taints the Pods tolerate."
    )
    affinity: KubeObject | None = Field(
        default=None,
        description="A core/v1 Affinity, copied to the PodSpec unchanged (validated there).",
    )

    cel_rules = (keys_rule("nodeSelector", "node label keys"),)


class Resources(ApiModel):
    """Compute resources of the vLLM container (core/v1 ResourceRequirements)."""

    requests: dict[MapKey, Quantity] | None = Field(
        default=None, max_length=16, description="Minimum resources, e.g. cpu, memory."
    )
    limits: dict[MapKey, Quantity] | None = Field(
        default=None,
        max_length=16,
        description=(
            f"Maximum resources. When `{GAUDI_RESOURCE}` is absent the operator sets it to "
            "spec.engine.tensorParallelSize; when present it must equal it."
        ),
    )

    cel_rules = (
        keys_rule("requests", "resource names"),
        keys_rule("limits", "resource names"),
    )

    def gaudi_count(self) -> int | str | None:
        """The Gaudi card limit the user wrote, if any."""
        return (self.limits or {}).get(GAUDI_RESOURCE)


def container_resources(resources: Resources | None, gaudi_cards: int) -> dict[str, Any]:
    """core/v1 ResourceRequirements for the vLLM container, `habana.ai/gaudi` filled in.

    Extended resources are requested through limits alone (requests default to them), so the
    card count goes into limits; a written count is kept (the CRD already forces it equal).
    Quantities come out as strings, as core/v1 serializes them (the official client's request
    models refuse an int where a quantity string is expected).
    """
    requests = {k: str(v) for k, v in (resources.requests or {}).items()} if resources else {}
    limits = {k: str(v) for k, v in (resources.limits or {}).items()} if resources else {}
    limits.setdefault(GAUDI_RESOURCE, str(gaudi_cards))
    return {"requests": requests, "limits": limits} if requests else {"limits": limits}


class EnvVar(ApiModel):
    """An environment variable of the vLLM container (core/v1 EnvVar)."""

    name: Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=ENV_NAME)] = Field(
        description="Variable name."
    )
    value: Annotated[str, StringConstraints(max_length=32768)] | None = Field(
        default=None, description="Literal value; exclusive with valueFrom."
    )
    value_from: KubeObject | None = Field(
        default=None,
        description="A core/v1 EnvVarSource (secretKeyRef, configMapKeyRef, fieldRef, ...).",
    )

    cel_rules = (
        Rule(
            cel="!(has(self.value) && has(self.valueFrom))",
            message="value and valueFrom are mutually exclusive",
            check=lambda s: s.value is None or s.value_from is None,
        ),
    )


AccessMode = Literal["ReadWriteOnce", "ReadWriteMany", "ReadWriteOncePod"]


def _read_write_many() -> list[AccessMode]:
    return ["ReadWriteMany"]


class ClaimTemplate(ApiModel):
    """A PersistentVolumeClaim the operator creates and owns."""

    storage_class_name: Name | None = Field(
        default=None, description="StorageClass of the claim; unset uses the cluster default."
    )
    access_modes: list[AccessMode] = Field(
        default_factory=_read_write_many,
        min_length=1,
        max_length=3,
        description=(
            "Access modes. ReadWriteMany lets warmup and every serving replica mount it; the "
            "runner copies the cache to local disk because NFS lacks file locking."
        ),
    )
    size: Annotated[str, StringConstraints(max_length=16, pattern=STORAGE_SIZE)] = Field(
        default="100Gi", description="Requested storage in Mi, Gi or Ti, e.g. 100Gi."
    )


_FACTORS = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}
_FACTORS |= {"Ei": 2.0**60, "n": 1e-9, "u": 1e-6, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9}
_FACTORS |= {"T": 1e12, "P": 1e15, "E": 1e18}
_SUFFIXED = re.compile(r"^([+-]?[0-9.]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$")


def quantity_value(value: int | str) -> float:
    """The numeric value of a quantity ("100Gi" -> 107374182400.0), as CEL's quantity() reads it."""
    if isinstance(value, int):
        return float(value)
    match = _SUFFIXED.match(value)
    if match is None:  # exponent form, e.g. 1e3
        return float(value)
    number, suffix = match.groups()
    return float(number) * _FACTORS.get(suffix or "", 1.0)
