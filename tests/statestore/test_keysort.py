"""``sort_order``: the order of binary keys by their codes equals Arrow's stable sort, with or
without a second key, for keys of one length or several, few varying bytes or many."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.statestore.keysort import group_ids, index_in, sort_order

# keys of one length that differ in a few positions (coded), or in many, or of several lengths
_FEW = st.binary(min_size=3, max_size=3).map(lambda b: b"L\x10" + b + b"\x00\x00")
_MANY = st.binary(min_size=12, max_size=12)
_ANY = st.binary(max_size=6)


@given(keys=st.one_of(st.lists(_FEW, max_size=40), st.lists(_MANY, max_size=20), st.lists(_ANY, max_size=40)),
       data=st.data(), offset=st.integers(0, 2))
def test_sort_order_equals_arrows_stable_sort(keys, data, offset):
    keys = keys + keys[: len(keys) // 3]   # some keys twice: their first order kept
    column = pa.array([b"pad"] * offset + keys, pa.binary()).slice(offset)
    assert sort_order(column).tolist() == pc.sort_indices(column).to_numpy().tolist()
    then = np.array(data.draw(st.lists(st.integers(0, 255), min_size=len(keys), max_size=len(keys))), np.int64)
    table = pa.table({"k": column, "t": then})
    expected = pc.sort_indices(table, [("k", "ascending"), ("t", "ascending")]).to_numpy().tolist()
    assert sort_order(column, then=then).tolist() == expected


def test_sort_order_takes_large_binary_and_chunked_keys():
    keys = pa.chunked_array([pa.array([b"b", b"a"], pa.large_binary()), pa.array([b"c", b"a"], pa.large_binary())])
    assert sort_order(keys).tolist() == [1, 3, 0, 2]


@given(keys=st.one_of(st.lists(_FEW, max_size=30), st.lists(_MANY, max_size=15), st.lists(_ANY, max_size=30)),
       others=st.one_of(st.lists(_FEW, max_size=30), st.lists(_ANY, max_size=30)))
def test_index_in_equals_arrows_index_in(keys, others):
    values = pa.array(keys + others[:3], pa.binary())
    value_set = pa.array(others + keys[:2] + others[:2], pa.binary())   # some keys twice: the first wins
    expected = pc.index_in(values, value_set=value_set).fill_null(-1).to_numpy().tolist()
    assert index_in(values, value_set).tolist() == expected


@given(keys=st.one_of(st.lists(_FEW, max_size=40), st.lists(_MANY, max_size=20), st.lists(_ANY, max_size=40)))
def test_group_ids_number_each_distinct_key_once(keys):
    column = pa.array(keys + keys[::2], pa.binary())
    ids, firsts = group_ids(column)
    values = column.to_pylist()
    assert [values[i] for i in firsts[ids]] == values
    assert len(firsts) == len(set(values)) and sorted(set(ids.tolist())) == list(range(len(firsts)))


@given(rows=st.lists(st.binary(min_size=5, max_size=5), min_size=1, max_size=40))
def test_varying_finds_the_columns_where_rows_differ(rows):
    from streamjoin.statestore.keycodes import varying

    matrix = np.frombuffer(b"".join(rows), np.uint8).reshape(len(rows), 5)
    assert varying(matrix).tolist() == [j for j in range(5) if len({r[j] for r in rows}) > 1]
