"""Walk the pydantic models of the CRD: every model a field can hold, however nested."""

from __future__ import annotations

from typing import Any, get_args

from pydantic import BaseModel


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """The models an annotation names, through unions, lists and dicts."""
    found: list[type[BaseModel]] = []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        found.append(annotation)
    for arg in get_args(annotation):
        found.extend(models_in(arg))
    return found


def all_models(root: type[BaseModel]) -> set[type[BaseModel]]:
    """``root`` and every model reachable from its fields."""
    found = {root}
    for field in root.model_fields.values():
        for model in models_in(field.annotation):
            if model not in found:
                found |= all_models(model)
    return found
