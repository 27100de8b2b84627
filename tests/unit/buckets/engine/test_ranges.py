"""The range generators against the reference doc's section 3.1 examples and their invariants."""

from __future__ import annotations

import pytest
from bucket_golden import tables
from hypothesis import given
from hypothesis import strategies as st

from warmgate.buckets import exp_range, lin_range, pad_range


@pytest.mark.parametrize(("args", "expected"), tables()["lin_range"])
def test_lin_range_doc_examples(args: list[int], expected: list[int]) -> None:
    assert lin_range(*args) == expected


@pytest.mark.parametrize(("args", "expected"), tables()["exp_range"])
def test_exp_range_doc_examples(args: list[int], expected: list[int]) -> None:
    assert exp_range(*args) == expected


@pytest.mark.parametrize(("args", "expected"), tables()["pad_range"])
def test_pad_range_doc_examples(args: list[int], expected: list[int]) -> None:
    assert pad_range(*args) == expected


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # The four examples of padding_aware.warmup_range_with_limits' upstream docstring.
        ((0, 8, 64, 64, 0), [0, 1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]),
        ((0, 8, 64, 64, 50), [0, 1, 2, 4, 8, 16, 32, 64]),
        ((0, 8, 64, 16, 50), [0, 1, 2, 4, 8, 16, 32, 48, 64]),
        ((16, 16, 128, 32, 25), [16, 32, 48, 64, 80, 96, 128]),
    ],
)
def test_pad_range_upstream_docstring_examples(
    args: tuple[int, int, int, int, int], expected: list[int]
) -> None:
    assert pad_range(*args) == expected


def test_exp_range_single_point_drops_the_zero() -> None:
    # limit 1 returns [max] alone: the 0/1 minimum is not re-added (engine quirk).
    assert exp_range(0, 1, 31, 1) == [31]
    assert exp_range(1, 2, 1, 1) == [1]


def test_exp_range_contiguous_pa_pins_the_last_point() -> None:
    assert exp_range(1, 128, 6000, 14, contiguous_pa=True)[-1] == 6000
    assert exp_range(1, 64, 2048, 12, contiguous_pa=True) == exp_range(1, 64, 2048, 12)


@pytest.mark.parametrize(
    "call",
    [
        lambda: lin_range(5, 1, 4),
        lambda: exp_range(1, 2, 64, 0),
        lambda: pad_range(5, 1, 4, 0, 25),
        lambda: pad_range(1, 1, 4, 0, 51),
        lambda: pad_range(1, 0, 4, 0, 25),
    ],
)
def test_engine_assertions_raise_value_error(call: object) -> None:
    with pytest.raises(ValueError, match="range"):
        call()  # type: ignore[operator]


bounds = st.tuples(st.integers(0, 64), st.integers(1, 256), st.integers(1, 5000)).filter(
    lambda t: t[0] <= t[2]
)


@given(bounds)
def test_lin_range_is_sorted_unique_and_bounded(b: tuple[int, int, int]) -> None:
    bmin, step, bmax = b
    out = lin_range(bmin, step, bmax)
    assert out == sorted(set(out))
    assert all(bmin <= v <= bmax for v in out if v != 0)
    assert all(v % step == 0 for v in out if v >= step)
    # Empty only when neither bmin (below step) nor a multiple of step lies in [bmin, bmax]:
    # the engine then generates 0 buckets and refuses the configuration.
    reachable = bmin == 0 or bmin < step or (bmax // step) * step >= bmin
    assert bool(out) == reachable


@given(bounds, st.integers(1, 20))
def test_exp_range_is_sorted_unique_and_ends_at_max(b: tuple[int, int, int], limit: int) -> None:
    bmin, step, bmax = b
    out = exp_range(bmin, step, bmax, limit)
    assert out == sorted(out)
    assert out[-1] <= bmax
    # Only the last element is clamped, so it can repeat its neighbour (engine quirk, e.g.
    # (27, 63, 63, 2) -> [63, 63]); generate_buckets deduplicates later.
    assert out[:-1] == sorted(set(out[:-1]))
    extra = {bmin} if bmin in (0, 1) else set()
    assert all(v % step == 0 or v in extra for v in out[:-1])
    if (step if bmin in (0, 1) else bmin) <= bmax:
        assert out[-1] == bmax


@given(bounds, st.integers(0, 300), st.integers(0, 50))
def test_pad_range_keeps_min_and_max(b: tuple[int, int, int], pad_max: int, pct: int) -> None:
    bmin, step, bmax = b
    out = pad_range(bmin, step, bmax, pad_max, pct)
    assert out == sorted(set(out))
    assert out[0] == bmin
    assert out[-1] == bmax
