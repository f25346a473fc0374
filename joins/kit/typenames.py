"""Column types named as a Spark user writes them, for error messages.

A join is declared over Spark DataFrames, whose columns reach the engine-free operators as Arrow
types; an error that says ``int64`` or ``timestamp[us, tz=UTC]`` makes a Spark user translate it
before they can cast. :func:`type_name` gives Spark SQL's name of the type (``bigint``,
``timestamp``, ``decimal(7,2)``, ``array<string>``), and Arrow's own name for the few types Spark
has none for (unsigned integers, ``float16``, a timestamp in nanoseconds), which only an
in-process user can give.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = ["type_name"]

#: Arrow types with one Spark SQL name, by Arrow's id.
_SIMPLE: dict[pa.DataType, str] = {
    pa.int8(): "tinyint", pa.int16(): "smallint", pa.int32(): "int", pa.int64(): "bigint",
    pa.float32(): "float", pa.float64(): "double", pa.bool_(): "boolean",
    pa.string(): "string", pa.large_string(): "string", pa.binary(): "binary", pa.large_binary(): "binary",
    pa.date32(): "date", pa.date64(): "date", pa.null(): "void",
}


def type_name(kind: pa.DataType) -> str:
    """Spark SQL's name for Arrow type ``kind`` (a dictionary named by its values), or Arrow's
    name where Spark has no such type."""
    if pa.types.is_dictionary(kind):
        return type_name(kind.value_type)
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    if pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_binary_view(kind) or pa.types.is_fixed_size_binary(kind):
        return "binary"
    if pa.types.is_timestamp(kind) and kind.unit != "ns":
        return "timestamp" if kind.tz is not None else "timestamp_ntz"
    if pa.types.is_duration(kind):
        return "interval day to second"
    if pa.types.is_time64(kind) and kind.unit == "us":
        return "time(6)"
    if pa.types.is_decimal(kind) and kind.precision <= 38:
        return f"decimal({kind.precision},{kind.scale})"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind) \
            or pa.types.is_list_view(kind) or pa.types.is_large_list_view(kind):
        return f"array<{type_name(kind.value_type)}>"
    if pa.types.is_map(kind):
        return f"map<{type_name(kind.key_type)},{type_name(kind.item_type)}>"
    if pa.types.is_struct(kind):
        return "struct<" + ",".join(f"{kind.field(i).name}:{type_name(kind.field(i).type)}"
                                    for i in range(kind.num_fields)) + ">"
    return str(kind)
