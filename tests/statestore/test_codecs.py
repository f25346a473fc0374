"""Order-preserving codecs: byte order of encodings equals value order, and decoding inverts."""

from __future__ import annotations

import datetime as dt
import math

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamjoin.statestore.codecs import (
    decode_float,
    decode_int,
    decode_timestamp,
    decode_uint32,
    encode_float,
    encode_int,
    encode_timestamp,
    encode_uint32,
    pack,
    unpack,
    unpack_head,
)

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
FLOATS = st.floats(allow_nan=False)
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
TIMES = st.datetimes(
    min_value=dt.datetime(1, 1, 1), max_value=dt.datetime(9999, 12, 31), timezones=st.just(dt.timezone.utc)
)
# One type per position, as the codec asks; None may stand in anywhere.
ELEMENT_TYPES = {
    "int": INT64, "float": FLOATS, "bool": st.booleans(), "bytes": st.binary(max_size=8),
    "str": st.text(max_size=6),  # Hypothesis text includes "\x00" and non-ASCII
}


def sign(x: int) -> int:
    return (x > 0) - (x < 0)


def compare(a, b) -> int:
    return sign((a > b) - (a < b))


def float_key(x: float) -> tuple[float, float]:
    """Numeric order, with -0.0 before 0.0 (the codec keeps the sign of zero)."""
    return (x, math.copysign(1.0, x))


def position_key(value):
    if value is None:
        return (0,)
    return (1, float_key(value) if isinstance(value, float) else value)


def tuple_key(values: tuple) -> tuple:
    return tuple(position_key(v) for v in values)


def micros(moment: dt.datetime) -> int:
    return (moment - EPOCH) // dt.timedelta(microseconds=1)


@given(INT64, INT64)
@example(-(2**63), 2**63 - 1)
@example(-1, 0)
@example(0, 1)
def test_codecs_int_byte_order_is_value_order(a: int, b: int) -> None:
    assert compare(encode_int(a), encode_int(b)) == compare(a, b)
    assert decode_int(encode_int(a)) == a and len(encode_int(a)) == 8


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1])
def test_codecs_int_out_of_range_is_refused(value: int) -> None:
    with pytest.raises(OverflowError):
        encode_int(value)


@given(FLOATS, FLOATS)
@example(-0.0, 0.0)
@example(-math.inf, math.inf)
@example(5e-324, -5e-324)
def test_codecs_float_byte_order_is_value_order(a: float, b: float) -> None:
    assert compare(encode_float(a), encode_float(b)) == compare(float_key(a), float_key(b))
    assert float_key(decode_float(encode_float(a))) == float_key(a)


@given(TIMES, TIMES)
@example(dt.datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=dt.timezone.utc), EPOCH)
def test_codecs_timestamp_byte_order_is_time_order(a: dt.datetime, b: dt.datetime) -> None:
    assert compare(encode_timestamp(micros(a)), encode_timestamp(micros(b))) == compare(a, b)
    assert decode_timestamp(encode_timestamp(micros(a))) == micros(a)


@st.composite
def same_shape_tuples(draw) -> tuple[tuple, tuple]:
    names = draw(st.lists(st.sampled_from(sorted(ELEMENT_TYPES)), max_size=4))
    def one() -> tuple:
        return tuple(draw(st.none() | ELEMENT_TYPES[n]) for n in names)
    return one(), one()


@given(same_shape_tuples())
@example(((b"a",), (b"a\x00",)))
@example((("a\x00",), ("ab",)))
@example((("",), ("\x00",)))
@example(((None, 1), (-5, None)))
def test_codecs_tuple_byte_order_is_tuple_order(pair: tuple[tuple, tuple]) -> None:
    a, b = pair
    assert compare(pack(*a), pack(*b)) == compare(tuple_key(a), tuple_key(b))


@given(same_shape_tuples())
def test_codecs_tuple_round_trips(pair: tuple[tuple, tuple]) -> None:
    for values in pair:
        assert tuple_key(unpack(pack(*values))) == tuple_key(values)
        assert [type(v) for v in unpack(pack(*values))] == [type(v) for v in values]


@given(same_shape_tuples(), st.data())
def test_codecs_prefix_tuple_is_byte_prefix_and_sorts_first(pair: tuple[tuple, tuple], data) -> None:
    full = pair[0]
    cut = data.draw(st.integers(0, len(full)), label="prefix length")
    prefix = pack(*full[:cut])
    assert pack(*full).startswith(prefix)  # so scan_prefix(pack(*prefix)) finds the extensions
    assert prefix <= pack(*full)


@given(st.lists(st.text(max_size=4), min_size=2, max_size=6))
def test_codecs_strings_with_nul_keep_their_order(words: list[str]) -> None:
    words = [w.replace("a", "\x00") for w in words]
    assert sorted(words, key=lambda w: pack(w)) == sorted(words)


def test_codecs_unpack_rejects_bytes_pack_cannot_make() -> None:
    for bad in (b"\x99", pack(1)[:-1], pack("a")[:-1], b"\x40a\x00\x01"):
        with pytest.raises(ValueError):
            unpack(bad)


def test_codecs_pack_refuses_unsupported_types() -> None:
    with pytest.raises(TypeError):
        pack(object())


@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1))
@example(0, 2**32 - 1)
def test_codecs_uint32_byte_order_is_value_order(a: int, b: int) -> None:
    assert compare(encode_uint32(a), encode_uint32(b)) == compare(a, b)
    assert decode_uint32(encode_uint32(a)) == a and len(encode_uint32(a)) == 4


def test_codecs_uint32_is_big_endian_and_refuses_out_of_range() -> None:
    assert encode_uint32(1) == b"\x00\x00\x00\x01"
    for value in (-1, 2**32):
        with pytest.raises(OverflowError):
            encode_uint32(value)


@given(same_shape_tuples(), same_shape_tuples())
def test_codecs_unpack_head_reads_the_head_and_keeps_the_tail_encoded(heads, tails) -> None:
    head, tail = heads[0], tails[0]
    values, rest = unpack_head(pack(*head, *tail), len(head))
    assert tuple_key(values) == tuple_key(head)
    assert rest == pack(*tail)


def test_codecs_unpack_head_reads_a_table_keys_value() -> None:
    # the rekey stage's value: pack(change time, sequence, has row, *join key)
    stored = pack(5, None, True, "u1", 2)
    assert unpack_head(stored, 3) == ((5, None, True), pack("u1", 2))
    assert unpack_head(stored, 0) == ((), stored)


def test_codecs_unpack_head_rejects_short_or_bad_bytes() -> None:
    for bad, count in ((pack(1, 2), 3), (pack(1)[:-1], 1), (b"\x99" + pack(1), 1)):
        with pytest.raises(ValueError):
            unpack_head(bad, count)


def test_codecs_pack_bytes_have_one_column_wise_owner():
    # the column-wise form of pack lives beside pack; no join, changelog or other package derives
    # pack's tags, terminator or integer width on its own
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    owners = {root / "statestore" / "codecs.py", root / "statestore" / "packed_columns.py"}
    learners = ("pack(0)[:1]", "pack(b\"\")[1:]", "pack(None)", "len(pack(0))", "def _pack_column", "def pack_columns")
    found = [str(path.relative_to(root)) for folder in ("joins", "statestore", "changelog", "jobs", "bench")
             for path in (root / folder).rglob("*.py")
             if path not in owners and any(text in path.read_text() for text in learners)]
    assert found == []
