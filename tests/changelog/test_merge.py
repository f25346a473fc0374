"""Folding deltas in Arrow (compose + merge) equals replaying them, whatever the chunking."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changelog.format import Delta
from streamjoin.changelog.merge import _segments, compose, merge
from tests.changelog.model import Write
from tests.changelog.strategies import keys, values, writes

_BIN = pa.large_binary()


def _delta(version: int, write: Write) -> Delta:
    starts = [s for s, _ in write.delete_ranges]
    ends = [e for _, e in write.delete_ranges]
    return Delta(version, pa.array(starts, _BIN), pa.array(ends, _BIN), pa.array(write.deletes, _BIN),
                 pa.array([k for k, _ in write.puts], _BIN), pa.array([v for _, v in write.puts], _BIN), {})


def _chunks(state: dict[bytes, bytes], sizes: list[int]):
    items = sorted(state.items())
    start, i = 0, 0
    while start < len(items):
        size = sizes[i % len(sizes)] if sizes else len(items)
        part = items[start:start + size]
        yield pa.array([k for k, _ in part], _BIN), pa.array([v for _, v in part], _BIN)
        start, i = start + size, i + 1


@given(base=st.dictionaries(keys, values, max_size=9), history=st.lists(writes, max_size=6),
       sizes=st.lists(st.integers(1, 4), max_size=4))
def test_merge_equals_replay_for_any_chunking(base, history, sizes):
    expected = dict(base)
    for write in history:
        expected = write.apply(expected)
    net = compose([_delta(i, w) for i, w in enumerate(history)])
    merged = list(merge(_chunks(base, sizes) if base else None, net))
    got_keys = [k for ks, _ in merged for k in ks.to_pylist()]
    got_values = [v for _, vs in merged for v in vs.to_pylist()]
    assert got_keys == sorted(expected)  # strictly ascending, every live key once
    assert dict(zip(got_keys, got_values)) == expected


@given(st.lists(st.tuples(keys, keys, st.integers(0, 5)), max_size=6), keys)
def test_segments_give_each_key_its_newest_covering_range(ranges, key):
    ranges = [(s, e, t) for s, e, t in ranges if s < e]
    covering = [t for s, e, t in ranges if s <= key < e]
    found = [t for s, e, t in _segments(ranges) if s <= key < e]
    assert found == ([max(covering)] if covering else [])
