"""Reading decoded JSON: strictly, collecting every validation error with its path (`Fields`,
for the warmup order the runner must refuse when wrong), or leniently (`count`, `number`,
`text`, `texts`, for the documents the operator reads from Pods anyone who may run one can
write: a value of the wrong type reads as absent or zero, never as an error or a pass)."""

from __future__ import annotations

from typing import Any


class PlanError(ValueError):
    """The plan cannot be used; ``problems`` lists each reason with its JSON path."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


_MISSING: Any = object()


class Fields:
    """One JSON object being read; unknown keys are errors so format drift never passes silently."""

    def __init__(self, raw: object, path: str, errors: list[str], present: bool = True) -> None:
        if present and not isinstance(raw, dict):
            errors.append(f"{path}: expected an object, got {type(raw).__name__}")
            raw = {}
        self.raw: dict[str, Any] = raw if isinstance(raw, dict) else {}
        self.path = path
        self.errors = errors
        self.present = present
        self.seen: set[str] = set()

    def error(self, message: str) -> None:
        """Record a problem under this object's path."""
        self.errors.append(f"{self.path}.{message}")

    def finish(self) -> None:
        """Report keys the format does not define."""
        for key in sorted(set(self.raw) - self.seen):
            self.error(f"{key}: unknown field")

    def _get(self, key: str, default: Any) -> Any:
        self.seen.add(key)
        if key in self.raw:
            return self.raw[key]
        if default is _MISSING:
            self.error(f"{key}: required")
        return default

    def _bad(self, key: str, want: str, value: object) -> None:
        self.error(f"{key}: expected {want}, got {value!r}")

    def text(self, key: str, default: Any = _MISSING) -> str:
        """A non-empty string."""
        value = self._get(key, default)
        if isinstance(value, str) and value:
            return value
        if value is not default or default is _MISSING:
            self._bad(key, "a non-empty string", value)
        return "" if default is _MISSING or default is None else str(default)

    def integer(
        self, key: str, default: Any = _MISSING, lo: int | None = None, hi: int | None = None
    ) -> int:
        """An integer (booleans refused) within [lo, hi]."""
        value = self._get(key, default)
        if value is default and default is _MISSING:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            self._bad(key, "an integer", value)
            return 0
        self._range(key, value, lo, hi)
        return value

    def opt_integer(self, key: str, lo: int | None = None) -> int | None:
        """An integer or null/absent."""
        value = self._get(key, None)
        if value is None:
            return None
        return self.integer(key, lo=lo)

    def number(self, key: str, default: Any = _MISSING, lo: float | None = None) -> float:
        """A finite number >= lo."""
        value = self._get(key, default)
        if value is default and default is _MISSING:
            return 0.0
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            self._bad(key, "a number", value)
            return 0.0
        self._range(key, value, lo, None)
        return float(value)

    def _range(self, key: str, value: float, lo: float | None, hi: float | None) -> None:
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            self._bad(key, f"a value in [{lo}, {hi}]", value)

    def boolean(self, key: str, default: bool) -> bool:
        """A JSON boolean."""
        value = self._get(key, default)
        if isinstance(value, bool):
            return value
        self._bad(key, "true or false", value)
        return default

    def choice(self, key: str, options: tuple[str, ...], default: str) -> str:
        """One of a fixed set of strings."""
        value = self._get(key, default)
        if value in options:
            return str(value)
        self._bad(key, f"one of {list(options)}", value)
        return default

    def text_list(self, key: str, default: Any = _MISSING, min_len: int = 0) -> list[str]:
        """A list of strings."""
        value = self._get(key, default)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            if len(value) < min_len:
                self._bad(key, f"at least {min_len} item(s)", value)
            return list(value)
        if value is not default or default is _MISSING:
            self._bad(key, "a list of strings", value)
        return []

    def text_map(self, key: str, default: Any = _MISSING) -> dict[str, str]:
        """An object whose values are all strings."""
        value = self._get(key, default)
        if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
            return dict(value)
        if value is not default or default is _MISSING:
            self._bad(key, "an object of strings", value)
        return {}

    def opt_object(self, key: str) -> dict[str, Any] | None:
        """A free-form object (passed through untouched) or null/absent."""
        value = self._get(key, None)
        if value is None or isinstance(value, dict):
            return value
        self._bad(key, "an object or null", value)
        return None

    def value(self, key: str, default: Any = _MISSING) -> Any:
        """The value as decoded, for a caller that checks it itself (``error`` reports)."""
        return self._get(key, default)

    def obj(self, key: str, required: bool = True) -> Fields:
        """A nested object with its own field checks."""
        value = self._get(key, _MISSING if required else None)
        return Fields(value, f"{self.path}.{key}", self.errors, present=value is not None)

    def obj_list(self, key: str) -> list[Fields]:
        """A list of nested objects."""
        value = self._get(key, _MISSING)
        if not isinstance(value, list):
            self._bad(key, "a list of objects", value)
            return []
        return [Fields(v, f"{self.path}.{key}[{i}]", self.errors) for i, v in enumerate(value)]


def count(value: object) -> int:
    """A counter: a non-negative int, or 0 for anything else (a bool is no count)."""
    return value if type(value) is int and value >= 0 else 0


def number(value: object) -> float | None:
    """A number (a bool is none), or None."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def text(value: object) -> str | None:
    """A string, or None."""
    return value if isinstance(value, str) else None


def texts(value: object, chars: int | None = None) -> tuple[str, ...]:
    """A list's entries as text (each cut to ``chars``), or none for anything but a list."""
    return tuple(str(v)[:chars] for v in value) if isinstance(value, list) else ()
