"""PostgreSQL values to Arrow arrays of a table's column types (see :mod:`streamjoin.cdc.catalog`).

Two forms arrive: the text form (``COPY ... (FORMAT csv)`` for snapshots: ``t``/``f`` booleans,
``2024-05-01 12:00:00+00`` timestamps) and wal2json's JSON values (numbers, booleans, strings for
everything else). Both become one Arrow array per column with one vectorised cast.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["from_text", "from_json_values"]


def from_text(text: pa.Array, type_: pa.DataType) -> pa.Array:
    """``text`` (PostgreSQL's text form, nulls as nulls) cast to ``type_``."""
    if pa.types.is_boolean(type_):
        return pc.equal(text, "t")
    return text.cast(type_)


def from_json_values(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """wal2json values of one column (numbers parsed as ``Decimal``) as an array of ``type_``."""
    if pa.types.is_timestamp(type_) or pa.types.is_date(type_):
        return pa.array(values, pa.string()).cast(type_)
    if pa.types.is_string(type_):
        return pa.array([v if v is None or isinstance(v, str) else str(v) for v in values], pa.string())
    if pa.types.is_floating(type_):
        return pa.array([None if v is None else float(v) for v in values], type_)
    return pa.array(values, type_)
