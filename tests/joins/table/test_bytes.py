"""The package byte format has one owner (:mod:`streamjoin.table.rows`): rows encoded column-wise
decode row-wise and column-wise to the same table, rows encoded row-wise decode column-wise to the
same bytes, and a key stage's value built from those bytes decodes (:func:`decode_held`) to them."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.statestore.codecs import pack
from streamjoin.table.held import decode_held
from streamjoin.table.rows import RowCodec, stored_type
from tests.examples import scaled

_MOMENT = st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31))
_COLUMNS = {
    "i": (pa.int64(), st.integers(-(1 << 63), (1 << 63) - 1)),
    "f": (pa.float64(), st.one_of(st.floats(allow_nan=True), st.sampled_from([-0.0, 0.0, float("nan")]))),
    "b": (pa.bool_(), st.booleans()),
    "s": (pa.string(), st.text(max_size=6)),
    "y": (pa.binary(), st.binary(max_size=6)),
    "d": (pa.decimal128(12, 2), st.decimals(-(10 ** 9), 10 ** 9, places=2, allow_nan=False,
                                            allow_infinity=False)),
    "t": (pa.timestamp("us"), _MOMENT),
    "day": (pa.date32(), st.dates()),
}


@st.composite
def tables(draw) -> pa.Table:
    names = draw(st.lists(st.sampled_from(sorted(_COLUMNS)), min_size=1, max_size=5, unique=True))
    n = draw(st.integers(0, 10))
    arrays = [pa.array(draw(st.lists(st.none() | _COLUMNS[c][1], min_size=n, max_size=n)), _COLUMNS[c][0])
              for c in names]
    return pa.table(arrays, names=names)


def _codec(table: pa.Table) -> RowCodec:
    return RowCodec(pa.schema([pa.field(f.name, stored_type(f.type, f.name)) for f in table.schema]))


def _bits(table: pa.Table) -> list[bytes]:
    """Each row's bytes: NaN equals NaN and -0.0 differs from 0.0, as in state."""
    return [pack(*row) for row in _codec(table).rows(table)]


@settings(max_examples=scaled(200))
@given(table=tables(), time=st.integers(-(1 << 63), (1 << 63) - 1), seq=st.none() | st.integers(0, 1 << 40))
def test_table_bytes_round_trip_through_both_paths(table: pa.Table, time: int, seq: int | None) -> None:
    codec = _codec(table)
    stored = table.cast(codec.schema)
    column_wise = codec.encode_columns(stored)
    row_wise = [codec.encode(r) for r in codec.rows(stored)]
    assert column_wise == row_wise
    # decode column-wise and row-wise, then encode again: the same bytes
    assert _bits(codec.decode_table(row_wise)) == row_wise
    assert _bits(codec.table([codec.decode(d) for d in column_wise])) == column_wise
    # a key stage's value carries the row's bytes as its join key; decode_held gives them back
    held = decode_held([pack(time, seq, True) + jk for jk in column_wise] + [None])
    assert held.jk.to_pylist() == [*column_wise, None]
    assert held.time[:-1].tolist() == [time] * len(column_wise)
