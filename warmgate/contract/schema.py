"""Reading decoded JSON: strictly, collecting every validation error with its path (`Fields`,
for the warmup order the runner must refuse when wrong), or leniently (`count`, `number`,
`text`, `texts`, for the documents the operator reads from Pods anyone who may run one can
write: a value of the wrong type reads as absent or zero, never as an error or a pass).

`decode` is the one way the operator turns such a document's bytes into JSON: bounded in size
and depth, without NaN or Infinity, every failure a `DocumentError` ("this document is
invalid"), never a RecursionError or an OverflowError; and `count` and `number` keep every
number within what a status field can hold (issue 34)."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any, Final

# The largest integer a JSON number carries exactly (2**53 - 1): a count read from a Pod is
# clamped to it, so that even a sum over a thousand Pods fits the status' int64 fields.
MAX_COUNT: Final = 2**53 - 1


class DocumentError(ValueError):
    """A document read from a Pod that is not a runner's: too large, too deep, not JSON, a
    number JSON cannot carry (NaN, Infinity), or not a JSON object."""


def depth(text: bytes) -> int:
    """The deepest nesting of JSON arrays and objects in ``text`` (strings skipped), counted
    before parsing: json.loads would recurse once per level, and a RecursionError is no
    ValueError."""
    deepest = level = 0
    in_string = escaped = False
    for byte in text:
        if in_string:
            escaped = not escaped and byte == 0x5C  # backslash
            in_string = escaped or byte != 0x22  # quote
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            level += 1
            deepest = max(deepest, level)
        elif byte in (0x5D, 0x7D):  # ] }
            level -= 1
    return deepest


def _no_constant(name: str) -> Any:
    raise DocumentError(f"{name} is no number a runner writes")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise DocumentError(f"{text[:40]} is beyond what a float holds")
    return value


def decode(raw: bytes | str, *, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """A JSON object from a document anyone who may run a Pod can write, or DocumentError."""
    text = raw.encode("utf-8", "replace") if isinstance(raw, str) else raw
    if len(text) > max_bytes:
        raise DocumentError(f"larger than {max_bytes} bytes")
    if depth(text) > max_depth:
        raise DocumentError(f"nested deeper than {max_depth} levels")
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except DocumentError:
        raise
    except (ValueError, RecursionError, OverflowError, MemoryError) as exc:
        raise DocumentError(f"not JSON: {str(exc)[:200]}") from exc
    if not isinstance(doc, dict):
        raise DocumentError(f"not a JSON object: {type(doc).__name__}")
    return doc


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

    def any_list(self, key: str) -> list[Any]:
        """A list whose entries the caller checks itself; absent: empty."""
        value = self._get(key, [])
        if isinstance(value, list):
            return value
        self._bad(key, "a list", value)
        return []

    def format(self, expected: str) -> None:
        """The document's ``format``, which must be the one this reader reads."""
        fmt = self.text("format")
        if fmt != expected:
            self.error(f"format: this runner reads {expected!r}, the plan says {fmt!r}")

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
    """A counter: a non-negative int (at most `MAX_COUNT`), or 0 for anything else (a bool is
    no count)."""
    return min(value, MAX_COUNT) if type(value) is int and value >= 0 else 0


def number(value: object) -> float | None:
    """A finite number within +-`MAX_COUNT` (a bool, NaN or an infinity is none), or None."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    try:
        found = float(value)
    except OverflowError:  # an int beyond any float
        found = math.copysign(math.inf, value)
    if math.isnan(found):
        return None
    return max(-float(MAX_COUNT), min(float(MAX_COUNT), found)) if math.isfinite(found) else None


def text(value: object, chars: int | None = None) -> str | None:
    """A string (cut to ``chars``), or None."""
    return value[:chars] if isinstance(value, str) else None


def texts(value: object, chars: int | None = None) -> tuple[str, ...]:
    """A list's entries as text (each cut to ``chars``), or none for anything but a list."""
    return tuple(str(v)[:chars] for v in value) if isinstance(value, list) else ()


def fields_json(doc: Any) -> dict[str, Any]:
    """A document whose JSON keys are its dataclass fields, in their order: its JSON form, each
    tuple as a list at every depth (e.g. a sweep step's ``expected`` graphs)."""
    return {f.name: _plain(getattr(doc, f.name)) for f in dataclasses.fields(doc)}


def _plain(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    return value
