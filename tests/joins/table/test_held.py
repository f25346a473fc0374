"""The key stage's state values decoded column-wise (``decode_held``, and ``held_rows`` of a key step that holds rows) give what ``unpack_head``
gives value by value, for every kind of sequence and join key, and keys without state."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.statestore.codecs import pack, unpack_head
from streamjoin.table.held import decode_held, held_rows
from tests.examples import scaled

_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_JK_VALUE = st.one_of(st.none(), _INT64, st.text(alphabet=st.sampled_from("a\x00\xffz"), max_size=4),
                      st.binary(max_size=4), st.floats(allow_nan=False), st.booleans())
_VALUE = st.one_of(st.none(), st.builds(lambda t, s, r, jk: pack(t, s, r, *jk), _INT64, st.one_of(st.none(), _INT64),
                                       st.booleans(), st.lists(_JK_VALUE, min_size=1, max_size=3)))


def _expected(values: list) -> list:
    return [None if v is None else unpack_head(v, 3) for v in values]


def _decoded(values) -> list:
    held = decode_held(values)
    return [None if not e else ((t, s if h else None, r), jk)
            for e, t, h, s, r, jk in zip(held.exists.tolist(), held.time.tolist(), held.has_seq.tolist(),
                                         held.seq.tolist(), held.row.tolist(), held.jk.to_pylist())]


@settings(max_examples=scaled(200))
@given(values=st.lists(_VALUE, max_size=12))
def test_decode_held_matches_unpack_head(values: list) -> None:
    assert _decoded(values) == _expected(values)


@settings(max_examples=scaled(100))
@given(values=st.lists(_VALUE, max_size=12), cut=st.integers(0, 3))
def test_decode_held_of_a_binary_column_equals_decode_of_its_list(values: list, cut: int) -> None:
    import pyarrow as pa

    column = pa.array([b"pad"] * cut + values, pa.binary()).slice(cut)   # a slice: its buffers start before it
    assert _decoded(column) == _expected(values)


def test_decode_held_takes_unusual_values_row_by_row() -> None:
    # a time that is not an integer is not the column-wise decoder's: it decodes value by value
    values = [pack(5, None, True, 1), pack(True, 3, False, "x"), None]
    held = decode_held(values)
    assert held.time.tolist() == [5, 1, 0] and held.seq.tolist() == [0, 3, 0]
    assert held.row.tolist() == [True, False, False] and held.jk.to_pylist() == [pack(1), pack("x"), None]


def test_decode_held_refuses_bytes_pack_cannot_make() -> None:
    with pytest.raises(ValueError):
        decode_held([b"\xee\x00"])


_HELD_ROW = st.one_of(st.none(), st.builds(lambda t, s, r, row: pack(t, s, r) + (pack(*row) if r else b""), _INT64,
                                           st.one_of(st.none(), _INT64), st.booleans(),
                                           st.lists(_JK_VALUE, min_size=1, max_size=3)))


@settings(max_examples=scaled(200))
@given(values=st.lists(_HELD_ROW, max_size=12), cut=st.integers(0, 3))
def test_held_rows_are_the_bytes_after_the_head_of_a_key_that_holds_a_row(values: list, cut: int) -> None:
    import pyarrow as pa

    column = pa.array([b"pad"] * cut + values, pa.binary()).slice(cut)   # a slice: its buffers start before it
    expected = [None if v is None or not unpack_head(v, 3)[0][2] else unpack_head(v, 3)[1] for v in values]
    assert held_rows(column).to_pylist() == expected


def test_held_rows_take_unusual_heads_value_by_value() -> None:
    import pyarrow as pa

    values = pa.array([pack(True, None, True) + pack(7), pack(5, 2, True) + pack("r"), pack(5, None, False), None],
                      pa.binary())
    assert held_rows(values).to_pylist() == [pack(7), pack("r"), None, None]
