"""PostgreSQL values to Arrow arrays of a table's column types (see :mod:`streamjoin.cdc.catalog`).

Two forms arrive: the text form (``COPY ... (FORMAT csv)`` for snapshots: ``t``/``f`` booleans,
``2024-05-01 12:00:00+00`` timestamps) and wal2json's JSON values (booleans, numbers kept as the text
they were written as, strings for everything else). Both become one Arrow array per column with one
vectorised cast.

A value PostgreSQL accepts never stops a conversion:

* ``infinity`` / ``-infinity`` timestamps and dates read as :data:`LATEST` / :data:`EARLIEST` (the
  range Python and Spark share, 0001-01-01 to 9999-12-31 23:59:59.999999);
* ``NaN``, ``Infinity`` and ``-Infinity`` in ``real``, ``double precision`` and ``numeric`` columns
  read as null: wal2json writes them as JSON ``null`` (JSON has no such numbers), so a change cannot
  tell them from a null, and the snapshot reads them as null too, to agree with the changes
  (:data:`NON_FINITE`); ``-0`` keeps its sign;
* a value the column's Arrow type cannot hold (a BC date, a year after 9999, a numeric ``NaN`` or
  value past a ``numeric(p, s)`` column's precision) reads as null and is
  reported in the returned ``bad`` mapping (row index -> reason): the caller sets the row aside.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["from_text", "from_json_values", "LATEST", "EARLIEST", "NON_FINITE"]

#: What ``infinity`` and ``-infinity`` timestamps (without their time zone) and dates read as.
LATEST = "9999-12-31 23:59:59.999999"
EARLIEST = "0001-01-01 00:00:00"
#: The text of the numbers that read as null (what wal2json writes as JSON ``null``).
NON_FINITE = ("NaN", "Infinity", "-Infinity")


def from_text(text: pa.Array, type_: pa.DataType) -> tuple[pa.Array, dict[int, str]]:
    """``text`` (PostgreSQL's text form, nulls as nulls) cast to ``type_``, and the rows it could
    not hold (index -> reason; those rows are null in the array)."""
    if pa.types.is_boolean(type_):
        return pc.equal(text, "t"), {}
    if pa.types.is_string(type_):
        return text, {}
    if pa.types.is_timestamp(type_) or pa.types.is_date(type_):
        text = _finite(text, type_)
    elif pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        text = pc.if_else(pc.is_in(text, pa.array(NON_FINITE)), pa.scalar(None, pa.string()), text)
    try:
        return text.cast(type_), {}
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _cast_each(text, type_)


def from_json_values(values: Sequence[Any], type_: pa.DataType) -> tuple[pa.Array, dict[int, str]]:
    """wal2json values of one column as an array of ``type_``, and the rows it could not hold
    (see :func:`from_text`)."""
    if pa.types.is_boolean(type_) and all(v is None or isinstance(v, bool) for v in values):
        return pa.array(values, pa.bool_()), {}
    text = [v if v is None or isinstance(v, str) else _text(v) for v in values]
    return from_text(pa.array(text, pa.string()), type_)


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "t" if value else "f"
    return str(value)


def _finite(text: pa.Array, type_: pa.DataType) -> pa.Array:
    """``infinity``/``-infinity`` replaced by :data:`LATEST`/:data:`EARLIEST` in ``type_``'s text form."""
    latest, earliest = LATEST, EARLIEST
    if pa.types.is_date(type_):
        latest, earliest = LATEST[:10], EARLIEST[:10]
    elif type_.tz is not None:
        latest, earliest = latest + "+00", earliest + "+00"
    text = pc.if_else(pc.equal(text, "infinity"), latest, text)
    return pc.if_else(pc.equal(text, "-infinity"), earliest, text)


def _cast_each(text: pa.Array, type_: pa.DataType) -> tuple[pa.Array, dict[int, str]]:
    """The slow path, after the vectorised cast failed: each value alone, the failing ones null."""
    bad: dict[int, str] = {}
    for i, value in enumerate(text.to_pylist()):
        if value is None:
            continue
        try:
            pa.array([value], pa.string()).cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            bad[i] = f"{value!r} does not fit {type_}"
    keep = pa.array([i not in bad for i in range(len(text))], pa.bool_())
    return pc.if_else(keep, text, pa.scalar(None, pa.string())).cast(type_), bad
