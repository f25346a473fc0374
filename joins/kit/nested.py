"""Nested values (lists, structs, maps) as one binary value each, and back.

A join that keeps rows as ``pack`` of scalar values (the table-table join, the view sink) keeps a
nested column's value as bytes: ``pack`` of the value's *tokens*, a walk of the value in its type's
order. The type says how to read them back, so the tokens need no tags of their own:

* a null value of any type: ``None``;
* a list (variable or fixed size): ``True`` and the element's tokens for each element, then ``False``;
* a map: ``True``, the key's and the item's tokens for each entry, in the map's order, then ``False``;
* a struct: ``True``, then each field's tokens in the type's field order;
* a scalar: its value as a row keeps it (:func:`leaf_kind`: a time as its integer, a decimal as its
  text, bytes and strings as they are).

Equal values give equal bytes (a map's entries in another order are another value, as Arrow
compares them), so rows compare as bytes whatever their columns. ``pack`` keeps the tokens' order,
so the bytes sort as the values do with nulls first: a list element by element, a shorter list
before a longer one it begins, a struct field by field (a decimal inside by its text). That makes a
nested column a tie-breaker of the canonical row order (:mod:`streamjoin.kit.order`). Encoding is
column-wise (:func:`streamjoin.statestore.packed_columns.pack_nested`, beside ``pack``), and so is
decoding (:func:`~streamjoin.statestore.packed_columns.unpack_nested`).
"""

from __future__ import annotations

import decimal
from typing import Any, Callable, Iterator

import numpy as np
import pyarrow as pa

from streamjoin.statestore.codecs import unpack
from streamjoin.statestore.packed_columns import pack_nested, unpack_nested

__all__ = ["is_nested", "leaf_kind", "physical_nested", "encode_nested", "decode_nested", "plain_nested", "from_plain"]


def is_nested(kind: pa.DataType) -> bool:
    """Whether ``kind`` is a nested type (a list, struct, map or union)."""
    return pa.types.is_nested(kind)


def leaf_kind(kind: pa.DataType) -> pa.DataType | None:
    """The type a row keeps a scalar of ``kind`` in (None: none): a time, date or duration as its
    integer, a decimal as its text, the other scalars (integers, floats of 32 or 64 bits, booleans,
    strings, binaries, null) as they are."""
    if pa.types.is_timestamp(kind) or pa.types.is_duration(kind) or pa.types.is_date64(kind):
        return pa.int64()
    if pa.types.is_time(kind) or pa.types.is_date32(kind):
        return pa.int32() if kind.bit_width == 32 else pa.int64()
    if pa.types.is_decimal(kind):
        return pa.string()
    plain = (pa.types.is_integer, pa.types.is_boolean, pa.types.is_string, pa.types.is_large_string,
             pa.types.is_binary, pa.types.is_large_binary, pa.types.is_fixed_size_binary, pa.types.is_null,
             pa.types.is_float32, pa.types.is_float64)
    return kind if any(check(kind) for check in plain) else None


def physical_nested(kind: pa.DataType) -> pa.DataType | None:
    """``kind`` (nested) with every scalar inside in the type a row keeps it in
    (:func:`leaf_kind`); None where one of them has none (float16, a dictionary, an extension
    type), or a struct repeats a field name."""
    if pa.types.is_struct(kind):
        names = [kind.field(i).name for i in range(kind.num_fields)]
        if len(set(names)) != len(names):
            return None
        fields = []
        for i in range(kind.num_fields):
            child = _physical(kind.field(i).type)
            if child is None:
                return None
            fields.append(pa.field(kind.field(i).name, child, kind.field(i).nullable))
        return pa.struct(fields)
    if pa.types.is_map(kind):
        key, item = _physical(kind.key_type), _physical(kind.item_type)
        return None if key is None or item is None else pa.map_(key, item)
    if pa.types.is_fixed_size_list(kind):
        child = _physical(kind.value_type)
        return None if child is None else pa.list_(child, kind.list_size)
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        child = _physical(kind.value_type)
        return None if child is None else (pa.large_list if pa.types.is_large_list(kind) else pa.list_)(child)
    return None


def _physical(kind: pa.DataType) -> pa.DataType | None:
    return physical_nested(kind) if is_nested(kind) else leaf_kind(kind)


def encode_nested(array: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> pa.Array:
    """Each value of ``array`` (of nested type ``kind``) as its bytes (see module); a null as null.
    Column-wise (:func:`streamjoin.statestore.packed_columns.pack_nested`)."""
    physical = physical_nested(kind)
    if physical is None:
        raise TypeError(f"{kind} holds a type a row cannot keep")
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if array.type != kind:
        array = array.cast(kind)
    return pack_nested(array.cast(physical))


def decode_nested(array: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> pa.Array:
    """Values of nested type ``kind`` from their bytes (:func:`encode_nested`); a null as null.
    Column-wise (:func:`streamjoin.statestore.packed_columns.unpack_nested`), but for values whose
    long lists would leave the column-wise rounds nearly empty, which are walked row by row; bytes
    that are not values of ``kind`` are refused with a ValueError naming it."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    physical = physical_nested(kind)
    decoded = None if physical is None else unpack_nested(array, physical)
    if decoded is None:
        return _row_wise(array, kind)
    values, left_out = decoded
    if not left_out.any():
        return values.cast(kind)
    rest = _row_wise(array.filter(pa.array(left_out)), kind)
    # the values in their places: those decoded column-wise first, then those walked
    places = np.empty(len(array), np.int64)
    places[np.flatnonzero(~left_out)] = np.arange(len(values))
    places[np.flatnonzero(left_out)] = len(values) + np.arange(len(rest))
    return pa.concat_arrays([values.cast(kind), rest]).take(pa.array(places, pa.int64()))


def _row_wise(array: pa.Array, kind: pa.DataType) -> pa.Array:
    """:func:`decode_nested` walking each value's tokens in Python (raises ValueError on bytes that
    are not a value of ``kind``)."""
    build = _builder(kind)
    values: list[Any] = []
    for data in array.to_pylist():
        if data is None:
            values.append(None)
            continue
        try:
            tokens = iter(unpack(data))
            values.append(build(tokens))
            rest = next(tokens, _END)
        except (StopIteration, ValueError, decimal.InvalidOperation):
            rest = None
        if rest is not _END:
            raise ValueError(f"{data!r} is not the bytes of a value of {kind}")
    try:
        return pa.array(values, kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError) as exc:
        raise ValueError(f"bytes that are not values of {kind}: {exc}") from exc


#: What an iterator of tokens gives past its end.
_END = object()


def plain_nested(array: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> list[Any]:
    """The Python values of ``array`` (nested type ``kind``) with every scalar inside as a row keeps
    it (:func:`leaf_kind`): lists, dicts of struct fields, lists of ``[key, item]`` of maps (what
    ``read_state`` shows and ``initial_state`` reads back, :func:`from_plain`)."""
    physical = physical_nested(kind)
    if physical is None:
        raise TypeError(f"{kind} holds a type a row cannot keep")
    return array.cast(physical).to_pylist()


def from_plain(values: list[Any], kind: pa.DataType) -> pa.Array:
    """Values of nested type ``kind`` from their plain form (:func:`plain_nested`; a map's entries
    as pairs), checked against the type (raises TypeError or ValueError)."""
    physical = physical_nested(kind)
    if physical is None:
        raise TypeError(f"{kind} holds a type a row cannot keep")
    walk = _walker(physical)
    build = _builder(kind)
    out: list[Any] = []
    for value in values:
        if value is None:
            out.append(None)
            continue
        tokens: list[Any] = []
        walk(_pairs(value, physical), tokens)
        try:
            out.append(build(iter(tokens)))
        except decimal.InvalidOperation:
            raise ValueError(f"{value!r} holds a decimal that does not read as one") from None
    return pa.array(out, kind)


def _pairs(value: Any, kind: pa.DataType) -> Any:
    """``value`` in the plain form with each map's entries as tuples and bytes as bytes (JSON
    gives lists and hex text)."""
    if value is None:
        return None
    if pa.types.is_map(kind):
        return [(_pairs(k, kind.key_type), _pairs(v, kind.item_type)) for k, v in value]
    if pa.types.is_struct(kind):
        if not isinstance(value, dict):
            raise TypeError(f"{value!r} is not an object of the struct's fields")
        return {kind.field(i).name: _pairs(value.get(kind.field(i).name), kind.field(i).type)
                for i in range(kind.num_fields)}
    if is_nested(kind):
        if not isinstance(value, list):
            raise TypeError(f"{value!r} is not a list")
        return [_pairs(v, kind.value_type) for v in value]
    binary = pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)
    if binary and isinstance(value, str):   # (JSON shows bytes as hex text)
        return bytes.fromhex(value)
    return value


def _walker(kind: pa.DataType) -> Callable[[Any, list[Any]], None]:
    """A function appending a value's tokens (``kind``: a physical type, :func:`physical_nested`)."""
    if pa.types.is_struct(kind):
        fields = [(kind.field(i).name, _walker(kind.field(i).type)) for i in range(kind.num_fields)]

        def struct(value: Any, out: list[Any]) -> None:
            if value is None:
                out.append(None)
                return
            out.append(True)
            for name, walk in fields:
                walk(value[name], out)
        return struct
    if pa.types.is_map(kind):
        walk_key, walk_item = _walker(kind.key_type), _walker(kind.item_type)

        def mapping(value: Any, out: list[Any]) -> None:
            if value is None:
                out.append(None)
                return
            for key, item in value:
                out.append(True)
                walk_key(key, out)
                walk_item(item, out)
            out.append(False)
        return mapping
    if is_nested(kind):
        walk_item = _walker(kind.value_type)

        def sequence(value: Any, out: list[Any]) -> None:
            if value is None:
                out.append(None)
                return
            for item in value:
                out.append(True)
                walk_item(item, out)
            out.append(False)
        return sequence
    return _leaf


def _leaf(value: Any, out: list[Any]) -> None:
    out.append(value)


def _builder(kind: pa.DataType) -> Callable[[Iterator[Any]], Any]:
    """A function reading one value of ``kind`` (its logical type) from tokens, as ``pa.array``
    takes it (a time as its integer, a decimal as a ``Decimal``, a map's entries as pairs)."""
    if pa.types.is_struct(kind):
        fields = [(kind.field(i).name, _builder(kind.field(i).type)) for i in range(kind.num_fields)]

        def struct(tokens: Iterator[Any]) -> Any:
            if next(tokens) is None:
                return None
            return {name: build(tokens) for name, build in fields}
        return struct
    if pa.types.is_map(kind):
        build_key, build_item = _builder(kind.key_type), _builder(kind.item_type)

        def mapping(tokens: Iterator[Any]) -> Any:
            if (more := next(tokens)) is None:
                return None
            entries = []
            while more:
                entries.append((build_key(tokens), build_item(tokens)))
                more = next(tokens)
            return entries
        return mapping
    if is_nested(kind):
        build_item = _builder(kind.value_type)

        def sequence(tokens: Iterator[Any]) -> Any:
            if (more := next(tokens)) is None:
                return None
            items = []
            while more:
                items.append(build_item(tokens))
                more = next(tokens)
            return items
        return sequence
    if pa.types.is_decimal(kind):
        def number(tokens: Iterator[Any]) -> Any:
            value = next(tokens)
            return None if value is None else decimal.Decimal(value)
        return number

    def scalar(tokens: Iterator[Any]) -> Any:
        return next(tokens)
    return scalar
