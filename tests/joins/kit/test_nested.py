"""Nested values as bytes (:mod:`streamjoin.kit.nested`): every list, struct and map a row can
keep reads back as it was, equal values give equal bytes, and the bytes sort as the values do
(nulls first, element by element, a shorter list before a longer one it begins)."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.kit.nested import (
    _builder,
    _walker,
    decode_nested,
    encode_nested,
    from_plain,
    physical_nested,
    plain_nested,
)
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.statestore.packed_columns import unpack_nested

UTC = dt.timezone.utc
#: scalar types and values drawn inside nested ones
LEAVES: list[tuple[pa.DataType, st.SearchStrategy]] = [
    (pa.int64(), st.integers(-2**63, 2**63 - 1)),
    (pa.int8(), st.integers(-128, 127)),
    (pa.string(), st.text(max_size=4)),
    (pa.binary(), st.binary(max_size=4)),
    (pa.bool_(), st.booleans()),
    (pa.float64(), st.floats(allow_nan=False)),
    (pa.timestamp("us", "UTC"), st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1),
                                             timezones=st.just(UTC))),
    (pa.date32(), st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1))),
    (pa.decimal128(9, 2), st.decimals(min_value=-9999999, max_value=9999999, places=2, allow_nan=False,
                                      allow_infinity=False)),
]


@st.composite
def nested(draw: Any, depth: int = 2) -> tuple[pa.DataType, st.SearchStrategy]:
    """A nested type and a strategy of its values (None included)."""
    def child() -> tuple[pa.DataType, st.SearchStrategy]:
        return draw(nested(depth - 1)) if depth > 1 and draw(st.booleans()) else draw(st.sampled_from(LEAVES))
    shape = draw(st.sampled_from(["list", "large_list", "fixed", "struct", "map"]))
    if shape == "struct":
        fields = [child() for _ in range(draw(st.integers(1, 3)))]
        kind = pa.struct([(f"f{i}", t) for i, (t, _) in enumerate(fields)])
        values = st.fixed_dictionaries({f"f{i}": st.none() | v for i, (_, v) in enumerate(fields)})
    elif shape == "map":
        (key, keys), (item, items) = draw(st.sampled_from(LEAVES)), child()
        kind = pa.map_(key, item)
        values = st.lists(st.tuples(keys, st.none() | items), max_size=3)
    else:
        item, items = child()
        if shape == "fixed":
            kind = pa.list_(item, 2)
            values = st.lists(st.none() | items, min_size=2, max_size=2)
        else:
            kind = (pa.large_list if shape == "large_list" else pa.list_)(item)
            values = st.lists(st.none() | items, max_size=3)
    return kind, st.none() | values


@st.composite
def columns(draw: Any) -> tuple[pa.DataType, list]:
    kind, values = draw(nested())
    return kind, draw(st.lists(values, max_size=6))


@given(columns(), st.data())
def test_nested_bytes_are_pack_of_the_values_tokens(column, data):
    kind, values = column
    array = pa.array(values, kind)
    start = data.draw(st.integers(0, len(values)))
    part = array.slice(start, data.draw(st.integers(0, len(values) - start)))   # (a slice: offsets inside)
    walk = _walker(physical_nested(kind))
    expected = []
    for value in plain_nested(part, kind):
        tokens: list = []
        if value is not None:
            walk(value, tokens)
        expected.append(None if value is None else pack(*tokens))
    assert encode_nested(part, kind).to_pylist() == expected


@given(columns())
def test_nested_bytes_read_back_as_they_were(column):
    kind, values = column
    array = pa.array(values, kind)
    encoded = encode_nested(array, kind)
    assert encoded.type == pa.binary() and encoded.null_count == array.null_count
    assert decode_nested(encoded, kind).equals(array)
    assert from_plain(plain_nested(array, kind), kind).equals(array)


@given(columns(), st.data())
def test_nested_bytes_read_back_column_wise_as_row_wise(column, data):
    kind, values = column
    encoded = encode_nested(pa.array(values, kind), kind)
    start = data.draw(st.integers(0, len(values)))
    part = encoded.slice(start, data.draw(st.integers(0, len(values) - start)))   # (offsets inside)
    decoded = unpack_nested(part, physical_nested(kind))
    assert decoded is not None
    values_read, left_out = decoded
    assert not left_out.any()   # (lists of at most three elements: no round runs nearly empty)
    values_read = values_read.cast(kind)
    values_read.validate(full=True)
    assert values_read.to_pylist() == _row_wise(part, kind).to_pylist()


def _row_wise(encoded: pa.Array, kind: pa.DataType) -> pa.Array:
    build = _builder(kind)
    return pa.array([None if d is None else build(iter(unpack(d))) for d in encoded.to_pylist()], kind)


_INTS = pa.list_(pa.int64())
_NESTED_LISTS = pa.struct([("a", pa.list_(pa.struct([("b", pa.list_(pa.string())), ("c", pa.int32())])))])


@pytest.mark.parametrize("kind, values, left_out", [
    (_INTS, [list(range(5000))], [True]),                                          # one long list
    (_INTS, [[1, 2, 3]] * 500 + [list(range(3000))] + [None, []] * 100, [False] * 500 + [True] + [False] * 200),
    (_INTS, [list(range(i % 150)) for i in range(3000)], [False] * 3000),          # lengths spread evenly
    (_INTS, [list(range(40))] * 20, [True] * 20),                                  # few values, long lists
    (_NESTED_LISTS, [{"a": [{"b": ["x"] * (300 if i == 7 else 1), "c": i}] * 2} for i in range(400)] + [None],
     [i == 7 for i in range(401)]),                                                # an inner list runs on
])
def test_nested_values_with_long_lists_where_few_are_are_walked_row_by_row(kind, values, left_out):
    encoded = encode_nested(pa.array(values, kind), kind)
    decoded = unpack_nested(encoded, physical_nested(kind))
    assert decoded is not None
    assert decoded[1].tolist() == left_out
    assert len(decoded[0]) == left_out.count(False)
    assert decode_nested(encoded, kind).equals(_row_wise(encoded, kind))
    assert decode_nested(encoded, kind).to_pylist() == values


@pytest.mark.parametrize("tokens, kind", [
    ((True, 1), pa.list_(pa.int64())),                               # a list without its end
    ((True, 1, False, 7), pa.list_(pa.int64())),                     # bytes after the value
    ((True, "x", False), pa.list_(pa.int64())),                      # an element of another type
    ((True, 1, True, 2, False), pa.list_(pa.int64(), 3)),            # a fixed-size list too short
    ((5,), pa.struct([("a", pa.int64())])),                          # not a struct's marker
    ((True, None, 1, False), pa.map_(pa.int64(), pa.int64())),       # a null map key
])
def test_nested_bytes_that_are_not_values_of_the_type_are_refused(tokens, kind):
    array = pa.array([pack(*tokens), None], pa.binary())
    assert unpack_nested(array, physical_nested(kind)) is None
    with pytest.raises(ValueError, match="not (the bytes of a value|values) of"):
        decode_nested(array, kind)


@given(columns())
def test_nested_bytes_are_equal_where_the_values_are(column):
    kind, values = column
    array = pa.array(values + values, kind)
    encoded = encode_nested(array, kind).to_pylist()
    plain = [repr(v) for v in plain_nested(array, kind)]   # (repr: 0.0 and -0.0 are two values)
    assert all((encoded[i] == encoded[j]) == (plain[i] == plain[j])
               for i in range(len(plain)) for j in range(len(plain)))


def _order(value: Any) -> Any:
    """The values' order, nulls first, written out independently of the bytes."""
    if value is None:
        return (0,)
    if isinstance(value, dict):
        return (1, tuple(_order(v) for v in value.values()))
    if isinstance(value, (list, tuple)):
        return (1, tuple(_order(v) for v in value))
    return (1, value)


@given(columns())
def test_nested_bytes_sort_as_the_values(column):
    kind, values = column
    array = pa.array(values, kind)
    plain = plain_nested(array, kind)   # (a time as its integer, a decimal as its text: as a row keeps them)
    encoded = encode_nested(array, kind).to_pylist()
    by_bytes = sorted(range(len(values)), key=lambda i: (encoded[i] is not None, encoded[i] or b""))
    assert [_order(plain[i]) for i in by_bytes] == sorted(_order(v) for v in plain)


@pytest.mark.parametrize("kind", [pa.list_(pa.float16()), pa.struct([("a", pa.int8()), ("a", pa.int8())]),
                                  pa.map_(pa.string(), pa.dictionary(pa.int8(), pa.string()))])
def test_nested_types_a_row_cannot_keep_are_refused(kind):
    assert physical_nested(kind) is None
    with pytest.raises(TypeError, match="cannot keep"):
        encode_nested(pa.nulls(1, kind), kind)


def test_nested_plain_values_that_do_not_read_are_refused():
    kind = pa.struct([("n", pa.int32()), ("d", pa.decimal128(5, 2))])
    with pytest.raises((TypeError, ValueError)):
        from_plain([{"n": "x", "d": None}], kind)
    with pytest.raises(ValueError, match="decimal"):
        from_plain([{"n": 1, "d": "abc"}], kind)
    with pytest.raises(TypeError, match="not a list"):
        from_plain([5], pa.list_(pa.int64()))
    assert from_plain([{"n": 1, "d": "1.50"}], kind).to_pylist() == [{"n": 1, "d": decimal.Decimal("1.50")}]
