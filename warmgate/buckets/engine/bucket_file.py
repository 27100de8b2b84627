"""Read and write ``VLLM_BUCKETING_FROM_FILE`` bucket files exactly as the engine reads them."""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from warmgate.buckets.engine.generate import Bucket

__all__ = ["ParsedBucketFile", "format_bucket_file", "parse_bucket_file"]

# The engine expands range(start, stop[, step]) to a list literal before literal_eval, only when
# the step is not 0 and the range has at most this many elements; otherwise the line fails to
# parse and is skipped.
MAX_RANGE_ELEMENTS = 10_000
_RANGE = re.compile(r"range\(\s*(-?\d+)\s*,\s*(-?\d+)\s*(?:,\s*(-?\d+)\s*)?\)")
# The rows warmgate writes itself (`format_bucket_file`), e.g. "(8, 1, 64)" or "(8, 1, [64, 128])":
# plain ASCII ints without leading zeros, which literal_eval reads as exactly these ints.
# Completion re-plans every candidate from its file, so these are read directly (`_parse_row`);
# any other line takes the engine's path.
_INT = r"(?:0|[1-9][0-9]{0,17})"
_ROW = re.compile(rf"\(({_INT}), ({_INT}), ({_INT}|\[{_INT}(?:, {_INT})*\])\)")


@dataclass(frozen=True)
class ParsedBucketFile:
    """The buckets of a file, split as the engine splits them: query == 1 means decode.

    Lists are sorted and may repeat a bucket (the engine deduplicates later). ``skipped`` holds
    (line number, line, reason) for each line the engine skips with a warning.
    """

    prompt: list[Bucket]
    decode: list[Bucket]
    skipped: list[tuple[int, str, str]] = field(default_factory=list)


def _expand_ranges(line: str) -> str:
    """Rewrite ``range(a, b[, s])`` as a list literal, e.g. range(256, 512, 128) -> [256, 384]."""

    def repl(m: re.Match[str]) -> str:
        start, stop, step = int(m[1]), int(m[2]), int(m[3] or 1)
        if step == 0 or len(range(start, stop, step)) > MAX_RANGE_ELEMENTS:
            return m[0]
        return repr(list(range(start, stop, step)))

    return _RANGE.sub(repl, line)


def _values(element: object) -> list[int] | None:
    """An element's ints: an int, or a list of ints; None when the engine would not accept it."""
    items: list[object] = element if isinstance(element, list) else [element]
    out = [v for v in items if isinstance(v, int) and not isinstance(v, bool)]
    return out if len(out) == len(items) else None


def _parse_row(line: str) -> list[Bucket] | None:
    """The buckets of a line in `format_bucket_file`'s form (what `_parse_line` gives for it),
    without compiling it as Python; None for any other line."""
    m = _ROW.fullmatch(line)
    if m is None:
        return None
    bs, query, ctx = int(m[1]), int(m[2]), m[3]
    ctxs = ctx[1:-1].split(", ") if ctx.startswith("[") else [ctx]
    return [(bs, query, int(c)) for c in ctxs]


def _parse_line(line: str) -> list[Bucket] | str:
    """The buckets of one non-comment line, or the reason the engine skips it."""
    row = _parse_row(line)
    if row is not None:
        return row
    try:
        value = ast.literal_eval(_expand_ranges(line))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return "not a Python literal"
    if not isinstance(value, tuple) or len(value) != 3:
        return "not a 3-tuple"
    dims = [_values(v) for v in value]
    if any(d is None for d in dims):
        return "elements must be ints or lists of ints"
    bs, query, ctx = (d or [] for d in dims)
    return list(itertools.product(bs, query, ctx))


def parse_bucket_file(text: str) -> ParsedBucketFile:
    """Parse bucket file text; lines the engine skips are reported in ``skipped``.

    e.g. ``([64,128,256], 1, range(512, 1024, 32))`` gives 3 x 16 = 48 decode buckets, and
    ``(1, 1, range(256, 512, 128))`` gives 2 (256 and 384: Python's stop is exclusive).
    """
    prompt: list[Bucket] = []
    decode: list[Bucket] = []
    skipped: list[tuple[int, str, str]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _parse_line(line)
        if isinstance(parsed, str):
            skipped.append((number, line, parsed))
            continue
        for bucket in parsed:
            (decode if bucket[1] == 1 else prompt).append(bucket)
    return ParsedBucketFile(sorted(prompt), sorted(decode), skipped)


def _rows(buckets: Iterable[Bucket]) -> list[str]:
    """One line per (bs, query) row: ``(8, 1, [64, 128, 192, 256])``."""
    lines = []
    for (bs, q), group in itertools.groupby(sorted(set(buckets)), key=lambda b: (b[0], b[1])):
        ctx = [c for _, _, c in group]
        lines.append(f"({bs}, {q}, {ctx[0] if len(ctx) == 1 else ctx})")
    return lines


def format_bucket_file(
    prompt: Sequence[Bucket], decode: Sequence[Bucket], header: Sequence[str] = ()
) -> str:
    """File text holding exactly these prompt and decode buckets, one line per row.

    Write seed decode buckets only: the engine applies the spec expansion to file decode buckets
    again. A prompt bucket with query 1 cannot be written (it would read back as decode).
    """
    bad = [b for b in prompt if b[1] == 1]
    if bad:
        raise ValueError(
            f"prompt buckets with query 1 cannot be written to a bucket file: {bad[:3]}"
        )
    wrong = [b for b in decode if b[1] != 1]
    if wrong:
        raise ValueError(f"decode buckets must have query 1: {wrong[:3]}")
    lines = [f"# {h}" for h in header]
    lines += ["# Prompt buckets: (batch_size, query_len, ctx_blocks)", *_rows(prompt)]
    lines += ["# Decode buckets (seeds): (batch_size, 1, num_blocks)", *_rows(decode)]
    return "\n".join(lines) + "\n"
