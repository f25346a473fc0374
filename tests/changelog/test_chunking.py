"""Snapshot chunking: batches end at a row count or before a byte budget, at the same entries
whatever chunks they arrive in (so one state gives one snapshot file), and never hold more bytes
than the budget unless one entry alone is larger."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changelog.log import rebatch
from streamjoin.statestore.columns import pair_chunks

entries = st.lists(st.tuples(st.binary(min_size=1, max_size=6), st.binary(max_size=40)), max_size=60)


def _arrays(items):
    keys, values = zip(*items) if items else ((), ())
    return pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())


def _cuts(chunks):
    return [len(k) for k, _ in chunks]


@given(items=entries, splits=st.lists(st.integers(0, 60), max_size=6), size=st.integers(1, 8),
       budget=st.integers(1, 120))
def test_rebatch_cuts_depend_on_entries_not_on_input_chunks(items, splits, size, budget):
    bounds = sorted({0, len(items), *[s for s in splits if s <= len(items)]})
    pieces = [_arrays(items[a:b]) for a, b in zip(bounds, bounds[1:])]
    whole = list(rebatch([_arrays(items)], size, budget))
    split = list(rebatch(pieces, size, budget))
    assert _cuts(whole) == _cuts(split)
    assert [(k.to_pylist(), v.to_pylist()) for k, v in whole] == [(k.to_pylist(), v.to_pylist()) for k, v in split]
    assert sum(_cuts(whole)) == len(items)
    for keys, values in whole:
        assert 1 <= len(keys) <= size
        held = sum(len(x) for x in keys.to_pylist()) + sum(len(x) for x in values.to_pylist())
        assert held <= budget or len(keys) == 1


@given(items=entries, size=st.integers(1, 8), budget=st.integers(1, 120))
def test_pair_chunks_agrees_with_rebatch(items, size, budget):
    direct = [(k.to_pylist(), v.to_pylist()) for k, v in pair_chunks(items, size, budget)]
    again = [(k.to_pylist(), v.to_pylist()) for k, v in rebatch([_arrays(items)], size, budget)]
    assert direct == again
