"""The interval join's reference and watermark helpers, on examples small enough to check by eye."""

from __future__ import annotations

from collections import Counter

import pytest

from streamjoin.testing.interval import interval_late_rows, interval_watermarks, reference_interval_join

L = [{"k": 1, "t": 10, "q": "a"}, {"k": 2, "t": 10, "q": "b"}, {"k": None, "t": 10, "q": "n"}, {"k": 1, "t": None, "q": "x"}]
R = [{"k": 1, "t": 8, "c": "lo"}, {"k": 1, "t": 13, "c": "hi"}, {"k": 1, "t": 14, "c": "out"}, {"k": None, "t": 10, "c": "n"}]


def ref(how: str) -> Counter:
    return Counter(reference_interval_join(
        L, R, left_key=["k"], right_key=["k"], left_time="t", right_time="t", lower=-2, upper=3, how=how,
        left_columns=["k", "t", "q"], right_columns=["k", "t", "c"],
    ))


@pytest.mark.parametrize("how, expected", [
    ("inner", [(1, 10, "a", 8, "lo"), (1, 10, "a", 13, "hi")]),
    ("left", [(1, 10, "a", 8, "lo"), (1, 10, "a", 13, "hi"), (2, 10, "b", None, None), (None, 10, "n", None, None)]),
    ("right", [(1, 10, "a", 8, "lo"), (1, 10, "a", 13, "hi"), (1, None, None, 14, "out"), (None, None, None, 10, "n")]),
    ("full", [(1, 10, "a", 8, "lo"), (1, 10, "a", 13, "hi"), (2, 10, "b", None, None), (None, 10, "n", None, None),
              (1, None, None, 14, "out"), (None, None, None, 10, "n")]),
    ("left_semi", [(1, 10, "a")]),
    ("left_anti", [(2, 10, "b"), (None, 10, "n")]),
])
def test_reference_interval_join_on_a_worked_example(how, expected):
    assert ref(how) == Counter(expected)


def test_reference_interval_watermarks_follow_the_slower_input():
    batches = [([{"t": 5}], []), ([{"t": 9}], [{"t": 4}]), ([], [{"t": None}, {"t": 7}]), ([], [])]
    assert interval_watermarks(batches, left_time="t", right_time="t", delay=1) == [None, None, 3, 6]


def test_reference_interval_late_rows_are_those_below_the_batch_watermark():
    batches = [([{"t": 5}], [{"t": 5}]), ([{"t": 3}, {"t": 4}, {"t": None}], [{"t": 2}])]
    assert interval_late_rows(batches, left_time="t", right_time="t", delay=1) == [
        ([False], [False]), ([True, False, False], [True]),
    ]
