"""The base model every API type derives from, and CEL rules that the server and pydantic share."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

# Reasons the apiserver accepts in x-kubernetes-validations (apiextensions FieldValueErrorReason).
CelReason = Literal["FieldValueInvalid", "FieldValueRequired", "FieldValueForbidden"]


@dataclass(frozen=True)
class Rule:
    """One cross-field rule, written once: as CEL for the apiserver and as a Python check.

    The CEL text runs in the apiserver (x-kubernetes-validations); `check` runs in pydantic so
    `warmgate plan` and the operator refuse exactly what the server refuses, with the same message.
    """

    cel: str
    message: str
    check: Callable[[Any], bool]
    field_path: str | None = None
    reason: CelReason | None = None

    def to_schema(self) -> dict[str, str]:
        """Return the x-kubernetes-validations entry for this rule."""
        entry = {"rule": self.cel, "message": self.message}
        if self.field_path:
            entry["fieldPath"] = self.field_path
        if self.reason:
            entry["reason"] = self.reason
        return entry


def add_rules(schema: dict[str, Any], cls: type[Any]) -> None:
    """Attach the class's CEL rules to its JSON schema (pydantic json_schema_extra hook)."""
    rules: tuple[Rule, ...] = getattr(cls, "cel_rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.to_schema() for rule in rules]


class ApiModel(BaseModel):
    """Base of every SpecDecodeDeployment type: camelCase aliases, unknown fields refused."""

    # extra="forbid" mirrors `kubectl apply --validate=strict`; field names stay snake_case in
    # Python and camelCase in YAML, and both spellings are accepted on input.
    # strict=True: "yes" is not a boolean and "8" is not an integer, exactly as the apiserver's
    # schema validation sees them, so pydantic never accepts what the server refuses.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        json_schema_extra=add_rules,
    )

    cel_rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_cel_rules(self) -> Self:
        for rule in type(self).cel_rules:
            if not rule.check(self):
                raise ValueError(rule.message)
        return self

    def to_dict(self) -> dict[str, Any]:
        """Dump as the apiserver stores it: camelCase keys, unset optional fields omitted."""
        return self.model_dump(mode="json", by_alias=True, exclude_none=True)
