"""The prover's building blocks against their definitions: staircases, fallback runs, overlaps."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from warmgate.buckets import fallback_value, first_fit
from warmgate.buckets.engine.steps import INF, Staircase, fallback_pieces, overlap, rows_of

_buckets = st.lists(
    st.tuples(st.integers(1, 12), st.integers(1, 4), st.integers(0, 60)), min_size=1
).map(lambda b: sorted(set(b)))


@given(buckets=_buckets, bs=st.integers(1, 13), query=st.integers(1, 5))
def test_staircase_is_first_fit(buckets: list[tuple[int, int, int]], bs: int, query: int) -> None:
    stairs = Staircase.build(rows_of(buckets), bs, query)
    for x in range(62):
        assert stairs.at(x) == first_fit(buckets, (bs, query, x))
    pieces = list(stairs.pieces(0, 61))
    assert pieces[0][0] == 0
    assert pieces[-1][1] == 61
    for (_, end, _), (start, _, _) in itertools.pairwise(pieces):
        assert start == end + 1
    for lo, hi, hit in pieces:
        assert all(stairs.at(x) == hit for x in range(lo, hi + 1))


def test_staircase_doc_example() -> None:
    """Config A, k=0: (12, 1, 500) -> (22, 1, 640), since the bs-12 row stops at 384."""
    rows = rows_of([(12, 1, 384), (22, 1, 448), (22, 1, 640), (22, 1, 704)])
    assert Staircase.build(rows, 12, 1).at(500) == (22, 1, 640)
    assert Staircase.build(rows, 12, 1).top == 704


@given(lo=st.integers(0, 5000), width=st.integers(0, 3000), base=st.sampled_from([2, 32]))
def test_fallback_runs_are_constant_and_tile(lo: int, width: int, base: int) -> None:
    runs = list(fallback_pieces(lo, lo + width, base))
    assert runs[0][0] == lo
    assert runs[-1][1] == lo + width
    for a, b, value in runs:
        assert fallback_value(a, base) == value == fallback_value(b, base)
    for (_, end, _), (start, _, _) in itertools.pairwise(runs):
        assert start == end + 1


def test_fallback_runs_cross_cube_bands() -> None:
    """Base 32: 28..64 -> 128 (step 128); 65..125 -> 160; 126..192 -> 192; 193..216 -> 384."""
    assert list(fallback_pieces(28, 216, 32)) == [
        (28, 64, 128),
        (65, 125, 160),
        (126, 192, 192),
        (193, 216, 384),
    ]


@given(
    s_range=st.tuples(st.integers(1, 200), st.integers(0, 80)),
    n_range=st.tuples(st.integers(1, 20), st.integers(0, 8)),
    per_seq=st.integers(1, 12),
    cap=st.none() | st.integers(1, 150),
)
def test_overlap_counts_like_enumeration(
    s_range: tuple[int, int], n_range: tuple[int, int], per_seq: int, cap: int | None
) -> None:
    (a, width), (n1, span) = s_range, n_range
    b, n2, limit = a + width, n1 + span, INF if cap is None else cap
    states = [
        (n, s) for n in range(n1, n2 + 1) for s in range(max(a, n), min(b, per_seq * n, limit) + 1)
    ]
    expected = (len(states), *states[0], max(s for _, s in states)) if states else None
    assert overlap(a, b, n1, n2, (per_seq, limit)) == expected
