"""Does a live object still hold what the operator wrote? (pure, for drift repair)

The API server adds defaults (protocol, defaultMode, nodePort, ...), drops Go zero values
(``readOnly: false``, an empty env value) and writes quantities in canonical form (1000m ->
1), so a live object is never equal to the manifest the operator sent. It *holds* it when
every field the operator set is there with the same value, read the way the server reads it;
anything a user changed or removed by hand (`kubectl edit`) does not hold.
"""

from __future__ import annotations

from typing import Any

from warmgate.api.kube import quantity_value


def _zero(value: Any) -> bool:
    """A Go zero value, which the server omits (omitempty) instead of storing."""
    return value is None or value is False or value == 0 or value in ("", [], {})


def _same_quantity(want: Any, have: Any) -> bool:
    try:
        return quantity_value(want) == quantity_value(have)
    except (TypeError, ValueError):
        return False


def first_difference(want: Any, have: Any, path: str = "", quantities: bool = False) -> str | None:
    """The path of the first field of ``want`` that ``have`` does not hold, or None."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return path or "."
        for key, value in want.items():
            if key not in have:
                if _zero(value):
                    continue
                return f"{path}.{key}"
            found = first_difference(
                value, have[key], f"{path}.{key}", quantities or key == "resources"
            )
            if found is not None:
                return found
        return None
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return path or "."
        for i, (w, h) in enumerate(zip(want, have, strict=True)):
            found = first_difference(w, h, f"{path}[{i}]", quantities)
            if found is not None:
                return found
        return None
    if want == have or (quantities and _same_quantity(want, have)):
        return None
    return path or "."
