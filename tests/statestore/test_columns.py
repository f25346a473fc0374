"""The store contract's column-wise methods equal the row-wise ones, on every backend."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.statestore import StoreError
from streamjoin.statestore.columns import ColumnWrite, PrefixScan
from streamjoin.statestore.errors import StoreWriteError
from tests.examples import scaled
from tests.statestore.conftest import BACKENDS, Backend

_KEYS = st.binary(min_size=0, max_size=4)
_RANGES = st.lists(st.tuples(_KEYS, _KEYS).map(sorted).map(tuple), max_size=2)
_WRITE = st.tuples(st.lists(st.tuples(_KEYS, st.binary(max_size=6)), max_size=12), st.lists(_KEYS, max_size=6), _RANGES)


def _scan(store) -> list:
    return list(store.scan())


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
@settings(max_examples=scaled(25))
@given(writes=st.lists(_WRITE, min_size=1, max_size=4), probes=st.lists(_KEYS, max_size=10),
       prefixes=st.lists(st.binary(min_size=1, max_size=2), max_size=6))
def test_store_column_methods_equal_row_methods(backend: Backend, writes, probes, prefixes) -> None:
    with tempfile.TemporaryDirectory() as root:
        rows, columns = backend.open(os.path.join(root, "rows")), backend.open(os.path.join(root, "columns"))
        try:
            for version, (puts, deletes, ranges) in enumerate(writes):
                rows.write(puts, deletes, ranges, version=version)
                columns.write_columns(ColumnWrite.of_lists(puts, deletes, ranges), version=version)
                assert _scan(columns) == _scan(rows)
                assert columns.version == rows.version == version
            assert columns.multi_get_column(pa.array(probes, pa.binary())).to_pylist() == rows.multi_get(probes)
            found = columns.scan_prefixes_columns(prefixes)
            expected = rows.scan_prefixes(prefixes)
            assert found.counts.tolist() == [len(e) for e in expected]
            assert list(zip(found.keys.to_pylist(), found.values.to_pylist())) == [kv for e in expected for kv in e]
        finally:
            rows.close()
            columns.close()


def test_column_write_sorted_keeps_the_last_put_of_a_key() -> None:
    write = ColumnWrite.of([b"b", b"a", b"b", b"c"], [b"1", b"2", b"3", b"4"], [b"z", b"y", b"z"]).sorted()
    assert write.put_keys.to_pylist() == [b"a", b"b", b"c"]
    assert write.put_values.to_pylist() == [b"2", b"3", b"4"]
    assert write.delete_keys.to_pylist() == [b"y", b"z"]


def test_column_write_concat_is_each_part_plus_the_next() -> None:
    parts = [ColumnWrite.of([b"a"], [b"1"], [b"x"]), ColumnWrite.of([], [], [b"y"]), ColumnWrite.of([b"c", b"b"], [b"3", b"2"])]
    joined = ColumnWrite.concat(parts)
    chained = parts[0].plus(parts[1]).plus(parts[2])
    assert joined.as_lists() == chained.as_lists() == ([(b"a", b"1"), (b"c", b"3"), (b"b", b"2")], [b"x", b"y"])
    assert ColumnWrite.concat(parts[:1]) is parts[0]


def test_column_write_concat_keeps_the_first_writes_range_deletes_and_refuses_later_ones() -> None:
    first = ColumnWrite.of([b"a"], [b"1"], delete_ranges=[(b"a", b"c")])
    second = ColumnWrite.of([b"b"], [b"2"])
    assert ColumnWrite.concat([first, second]).delete_ranges == ((b"a", b"c"),)
    assert ColumnWrite.concat([first, second]).entries == 3
    with pytest.raises(ValueError, match="only the first write may have range deletes"):
        ColumnWrite.concat([second, first])


def test_column_write_of_refuses_what_is_not_bytes() -> None:
    with pytest.raises(StoreWriteError, match="put keys must be a binary column"):
        ColumnWrite.of(pa.array([1, 2]), [b"a", b"b"])
    with pytest.raises(StoreWriteError, match="null"):
        ColumnWrite.of([b"a", None], [b"x", b"y"])
    with pytest.raises(StoreWriteError, match="2 put keys but 1 put values"):
        ColumnWrite.of([b"a", b"b"], [b"x"])
    with pytest.raises(StoreWriteError, match="range deletes must be"):
        ColumnWrite.of(delete_ranges=[(b"a", "b")])


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_store_multi_get_column_refuses_keys_that_are_not_bytes(backend: Backend, tmp_path) -> None:
    store = backend.open(str(tmp_path / "s"))
    try:
        with pytest.raises(StoreError, match="multi_get_column of .*binary column"):
            store.multi_get_column(pa.array([1, 2]))
        assert isinstance(store.scan_prefixes_columns([]), PrefixScan)
    finally:
        store.close()
