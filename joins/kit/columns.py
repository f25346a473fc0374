"""An input batch's columns as its operator declared them, and the column that says why a row
was set aside. The engine (:mod:`streamjoin.runtime.operator`) and the joins' helpers use them."""

from __future__ import annotations

import pyarrow as pa

from streamjoin.errors import JoinError
from streamjoin.kit.typenames import type_name

__all__ = ["REASON_COLUMN", "conform", "cast_values"]

#: Column added to rows set aside (late rows, dead letters): why the row was not processed.
REASON_COLUMN = "_reason"


def conform(table: pa.Table, schema: pa.Schema, name: str) -> pa.Table:
    """``table``'s columns of ``schema``, in its order and types: an input batch as the operator
    declared it. Raises :class:`streamjoin.errors.JoinError` naming the columns it lacks."""
    missing = [n for n in schema.names if n not in table.column_names]
    if missing:
        raise JoinError(f"the {name} input batch lacks columns {missing} of its declared schema")
    table = table.select(schema.names)
    if table.schema.equals(schema):
        return table
    columns = [cast_values(table.column(i), field.type, f"column {field.name!r} of the {name} input")
               for i, field in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema)


def cast_values(values: pa.Array | pa.ChunkedArray, kind: pa.DataType, what: str,
                error: type[JoinError] = JoinError) -> pa.Array | pa.ChunkedArray:
    """``values`` as ``kind``. Raises ``error`` (:class:`streamjoin.errors.JoinError` unless given)
    naming ``what``, the declared and the found types and a value that does not convert (Arrow's
    own error names none of them)."""
    if values.type == kind:
        return values
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as exc:
        bad = _first_unconvertible(values, kind)
        example = "" if bad is None else f"; {bad!r} does not convert"
        raise error(
            f"{what} is declared {type_name(kind)} but holds {type_name(values.type)}{example}: cast it to "
            f"{type_name(kind)} "
            f"before the join, or declare the type it has ({exc})"
        ) from exc


def _first_unconvertible(values: pa.Array | pa.ChunkedArray, kind: pa.DataType) -> object:
    for value in values.to_pylist():
        try:
            pa.array([value], type=values.type).cast(kind)
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return value
    return None
