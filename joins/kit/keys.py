"""Join keys: the type both sides' key values are compared in, and float keys as Spark compares them.

* :func:`common_key_type`: the type a pair of key columns is compared (and output) in: their type
  when equal, else a lossless widening of both within one family (integers, floating point,
  decimals, strings, binary); dictionary-encoded keys are compared as their values. The interval
  and table-table joins type their keys with it, and the Spark layer routes rows with it
  (:func:`routing_key_type`), so equal keys reach one partition whichever input they come from.
* :func:`family_key_type`: the enrichment join's variant: both columns in one family (integers,
  strings, binary, booleans), compared in the family's widest type (int64, large_string,
  large_binary, bool), which its state hashes keys in.
* :func:`normal_keys` puts floating-point key values in the form Spark compares them in
  (``-0.0`` is ``0.0``; every NaN is one NaN, equal to itself), so that routing, matching and
  state keys agree with Spark's joins.

Every error is a :class:`streamjoin.errors.JoinDefinitionError` naming both columns and what to do.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.typenames import type_name

__all__ = ["common_key_type", "family_key_type", "routing_key_type", "normal_key_array", "normal_keys",
           "normal_key_value"]


def _is_string(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind)


def _is_binary(kind: pa.DataType) -> bool:
    return pa.types.is_binary(kind) or pa.types.is_large_binary(kind)


#: Families a key type may widen within (:func:`common_key_type`).
_WIDENING: tuple[Callable[[pa.DataType], bool], ...] = (
    pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, _is_string, _is_binary,
)

#: Families of :func:`family_key_type`, each with the type its values are compared (and hashed) in.
_FAMILIES: tuple[tuple[Callable[[pa.DataType], bool], pa.DataType], ...] = (
    (pa.types.is_integer, pa.int64()), (_is_string, pa.large_string()),
    (_is_binary, pa.large_binary()), (pa.types.is_boolean, pa.bool_()),
)


def _decoded(kind: pa.DataType) -> pa.DataType:
    return kind.value_type if pa.types.is_dictionary(kind) else kind


def common_key_type(left_name: str, left: pa.DataType, right_name: str, right: pa.DataType) -> pa.DataType:
    """The type key columns ``left_name`` (``left``) and ``right_name`` (``right``) are compared
    in: equal, or a lossless widening of both (see module). Raises :class:`JoinDefinitionError`
    for types with no such widening, and for a type Arrow cannot join on (nested types)."""
    problem = f"key columns left {left_name!r} ({type_name(left)}) and right {right_name!r} ({type_name(right)})"
    left, right = _decoded(left), _decoded(right)
    common = left if left == right else _widening(left, right)
    if common is not None and pa.types.is_decimal256(common) and not (
            pa.types.is_decimal256(left) or pa.types.is_decimal256(right)):
        raise JoinDefinitionError(
            f"{problem} compare only as decimal({common.precision},{common.scale}), wider than a decimal's "
            f"38 digits (Spark's largest); cast both to one decimal of at most 38 digits, e.g. "
            f"decimal(38,{common.scale}) if the values fit")
    if common is None:
        raise JoinDefinitionError(f"{problem} have incompatible types; cast one side to the other's type")
    empty = pa.table({"k": pa.array([], common)})
    try:
        empty.join(empty, "k", join_type="inner", use_threads=False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
        raise JoinDefinitionError(f"{problem}: {type_name(common)} cannot be a join key; use a scalar type") from None
    return common


def _widening(left: pa.DataType, right: pa.DataType) -> pa.DataType | None:
    if not any(family(left) and family(right) for family in _WIDENING):
        return None
    schemas = [pa.schema([pa.field("k", left)]), pa.schema([pa.field("k", right)])]
    try:
        common = pa.unify_schemas(schemas, promote_options="permissive").field("k").type
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return None
    if pa.types.is_integer(common):
        for kind in (left, right):
            try:
                pa.array(_integer_bounds(kind), kind).cast(common, safe=True)
            except (pa.ArrowInvalid, OverflowError):
                return None
    return common


def _integer_bounds(kind: pa.DataType) -> list[int]:
    bits = kind.bit_width
    if pa.types.is_signed_integer(kind):
        return [-(1 << (bits - 1)), (1 << (bits - 1)) - 1]
    return [0, (1 << bits) - 1]


def family_key_type(left_name: str, left: pa.DataType, right_name: str, right: pa.DataType) -> pa.DataType:
    """The enrichment join's key type for ``left_name`` (``left``) and ``right_name`` (``right``):
    both integers (compared as int64; an unsigned value above its range fails the batch), strings,
    binary or booleans, compared in that family's type (see module)."""
    left, right = _decoded(left), _decoded(right)
    for family, kind in _FAMILIES:
        if family(left) and family(right):
            return kind
    raise JoinDefinitionError(
        f"event key {left_name!r} ({type_name(left)}) and table key {right_name!r} ({type_name(right)}) must "
        "both be integers, strings, binary or booleans; cast one to the other's type"
    )


def routing_key_type(columns: Sequence[tuple[str, pa.DataType]]) -> pa.DataType:
    """The one type each input's key column (name, type) is cast to before rows are hash-routed:
    their type when all are equal, int64 when all are integers (a mix of widths routes as int64, as
    it always has, so existing checkpoints keep their partitioning), else their
    :func:`common_key_type` (floating point and decimals widen). Raises :class:`JoinDefinitionError`
    naming the columns when there is none."""
    kinds = [_decoded(kind) for _, kind in columns]
    if all(kind == kinds[0] for kind in kinds):
        return kinds[0]
    if all(pa.types.is_integer(kind) for kind in kinds):
        return pa.int64()
    name, common = columns[0][0], kinds[0]
    for (other, _), kind in zip(columns[1:], kinds[1:]):
        common = common_key_type(name, common, other, kind)
    return common


def normal_key_array(values: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """``values`` as join keys compare: a floating-point column with ``-0.0`` made ``0.0`` and every
    NaN made the one canonical NaN (nulls stay null); any other type unchanged."""
    kind = values.type
    if pa.types.is_dictionary(kind) and pa.types.is_floating(kind.value_type):
        values, kind = values.cast(kind.value_type), kind.value_type
    if not pa.types.is_floating(kind) or len(values) == 0:
        return values
    zeroed = pc.add(values, pa.scalar(0.0, kind))          # IEEE: -0.0 + 0.0 == +0.0
    return pc.if_else(pc.is_nan(values), pa.scalar(float("nan"), kind), zeroed)


def normal_keys(table: pa.Table, columns: Sequence[str]) -> pa.Table:
    """``table`` with its floating-point ``columns`` put through :func:`normal_key_array` (same
    schema; columns it lacks, and dictionary-encoded ones, are left alone)."""
    for name in dict.fromkeys(columns):
        index = table.schema.get_field_index(name)
        if index < 0:
            continue
        column = table.column(index)
        if pa.types.is_floating(column.type):
            table = table.set_column(index, table.schema.field(index), normal_key_array(column))
    return table


def normal_key_value(value: Any, nan: Any = math.nan) -> Any:
    """One key value as join keys compare (:func:`normal_key_array`'s rule for a Python value):
    ``-0.0`` -> ``0.0``, any NaN -> ``nan`` (one stand-in for every NaN), anything else as it is."""
    if isinstance(value, float):
        if value != value:
            return nan
        if value == 0.0:
            return 0.0
    return value
