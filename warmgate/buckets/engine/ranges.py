"""The three one-dimensional range generators of vllm-gaudi: linear, exponential, padding-aware."""

from __future__ import annotations

import itertools
import math

from warmgate.buckets.engine.config import BucketPlanError

__all__ = ["exp_range", "lin_range", "pad_range"]


def lin_range(bmin: int, step: int, bmax: int) -> list[int]:
    """Port of ``linear.warmup_range`` followed by the strategy's ``sorted``.

    Doubles from ``bmin`` while below ``step``, then walks multiples of ``step`` up to ``bmax``.
    A zero minimum is replaced by ``step`` and ``0`` is appended at the end.

    Examples (reference doc, section 3.1)::

        lin_range(1, 32, 64)    -> [1, 2, 4, 8, 16, 32, 64]
        lin_range(2, 64, 128)   -> [2, 4, 8, 16, 32, 64, 128]
        lin_range(0, 1, 31)     -> [0, 1, ..., 31]
    """
    if bmin > bmax:
        raise BucketPlanError(f"linear range: min {bmin} is greater than max {bmax}")
    if step <= 0:
        raise BucketPlanError(f"linear range: step must be positive, got {step}")
    zero = bmin == 0
    if zero:
        if bmax == 0:
            return [0]
        bmin = step
    # The ramp stops at the first power-of-two multiple of bmin that reaches step or bmax.
    ramp = itertools.takewhile(
        lambda v: v < step and v <= bmax,
        itertools.accumulate(itertools.repeat(2), int.__mul__, initial=bmin),
    )
    stable = range(step, bmax + 1, step)
    out = [v for v in itertools.chain(ramp, stable) if v >= bmin]
    if zero:
        out.append(0)
    return sorted(out)


def exp_range(
    bmin: int, step: int, bmax: int, limit: int, *, contiguous_pa: bool = False
) -> list[int]:
    """Port of ``exponential.warmup_range_with_limit``: ``limit`` points spaced exponentially.

    The float formula is kept verbatim (``bmin * (bmax/bmin) ** ((1.0/(limit-1)) * i)``) because
    rounding of the float power decides some buckets. A minimum of 0 or 1 is replaced by ``step``
    and re-added afterwards, except when ``limit == 1`` (the engine returns ``[bmax]`` alone). Only
    the last element is clamped to ``bmax``; with contiguous PA the last point *is* ``bmax``.

    Examples (reference doc, section 3.1)::

        exp_range(1, 2, 64, 7)          -> [1, 2, 4, 8, 12, 22, 36, 64]
        exp_range(128, 128, 2048, 11)   -> [128, 256, 384, 512, 768, 896, 1280, 1664, 2048]
        exp_range(0, 1, 31, 6)          -> [0, 1, 2, 4, 8, 16, 31]
        exp_range(1, 128, 6000, 14)     -> [1, 128, 256, ..., 4480, 6000]   (6016 clamped)
    """
    if limit <= 0:
        raise BucketPlanError(
            f"exponential range: the number of buckets must be positive, got {limit}"
        )
    if step <= 0:
        raise BucketPlanError(f"exponential range: step must be positive, got {step}")
    extra: int | None = None
    if bmin in (0, 1):
        extra, bmin = bmin, step
    if limit == 1:
        return [bmax]
    points: set[int] = set()
    exponent_unit = 1.0 / (limit - 1)
    for i in range(limit):
        if i == limit - 1 and contiguous_pa:
            points.add(bmax)
            continue
        power = bmin * (bmax / bmin) ** (exponent_unit * i)
        points.add(math.ceil(power / step) * step)
    if extra is not None:
        points.add(extra)
    out = sorted(points)
    # e.g. (1, 128, 6000, 14): the last point rounds up to 6016 and is clamped to 6000; earlier
    # points above bmax (only possible when bmin > bmax) are left as the engine leaves them.
    out[-1] = min(out[-1], bmax)
    return out


def pad_range(bmin: int, step: int, bmax: int, pad_max: int, pad_percent: int) -> list[int]:
    """Port of ``padding_aware.warmup_range_with_limits``: linear steps thinned by padding limits.

    Doubles while the current value is at most ``step``; afterwards a multiple of ``step`` is kept
    only when skipping it would pad more than ``pad_percent`` % or ``pad_max`` elements, or when it
    is a multiple of ``pad_max``. ``bmax`` is always the last element.

    Examples (reference doc, section 3.1)::

        pad_range(1, 2, 64, 16, 25)        -> [1, 2, 4, 6, 8, 12, 16, 22, 30, 32, 44, 48, 64]
        pad_range(0, 2, 31, 16, 25)        -> [0, 1, 2, 4, 6, 8, 12, 16, 22, 30, 31]
        pad_range(128, 128, 2048, 512, 25) -> [128, 256, 384, 512, 640, 768, 1024, 1280, 1536, 2048]
    """
    if pad_max == 0:
        pad_max = bmax
    _check_pad_args(bmin, step, bmax, pad_max, pad_percent)
    out = [bmin]
    cur = bmin
    while cur <= bmax:
        last = out[-1]
        if cur <= step:
            nxt = last * 2 or 1  # doubling phase; 0 doubles to 1
            if nxt <= bmax:
                out.append(nxt)
        else:
            nxt = cur + step
            if cur != last and _keep_padded(cur, nxt, last, pad_max, pad_percent):
                out.append(cur)
        cur = nxt
    if out[-1] != bmax:
        out.append(bmax)
    return sorted(out)


def _check_pad_args(bmin: int, step: int, bmax: int, pad_max: int, pad_percent: int) -> None:
    """Raise ValueError where the engine asserts, and where its loop would never end."""
    if bmin > bmax:
        raise BucketPlanError(f"padding-aware range: min {bmin} is greater than max {bmax}")
    if step <= 0:
        raise BucketPlanError(f"padding-aware range: step must be positive, got {step}")
    if not 0 <= pad_percent <= 50:
        raise BucketPlanError(
            f"padding-aware range: pad_percent must be in [0, 50], got {pad_percent}"
        )
    if pad_max < 0:
        raise BucketPlanError(f"padding-aware range: pad_max must not be negative, got {pad_max}")


def _keep_padded(cur: int, nxt: int, last: int, pad_max: int, pad_percent: int) -> bool:
    """Whether ``cur`` must stay: skipping it would pad from ``last + 1`` up to ``nxt``.

    e.g. (1, 2, 64, 16, 25) at cur=10: nxt=12, gap=12-8-1=3, 3/12=0.25 is not > 0.25 -> skip 10.
    """
    gap = nxt - last - 1
    return gap / nxt > pad_percent / 100.0 or gap > pad_max or cur % pad_max == 0
