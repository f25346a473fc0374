"""A table's rows read in one transaction's snapshot, as Arrow (``COPY ... TO STDOUT`` in CSV).

The CSV is parsed by Arrow, every column as text first (a null is unquoted and empty, an empty
string quoted), then cast to the column's type (:func:`streamjoin.cdc.convert.from_text`). A row
with a value its column's type cannot hold is not in the table read but in the rows set aside: its
columns as PostgreSQL's text, and ``_reason``.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as csv

from streamjoin.cdc.catalog import TableInfo
from streamjoin.cdc.convert import NON_FINITE, from_text

__all__ = ["read_table", "quote_ident", "set_aside_schema"]


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier; ``schema.table`` quotes each part."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def read_table(conn: Any, info: TableInfo) -> tuple[pa.Table, pa.Table]:
    """Every row of ``info``'s table as the connection's current transaction sees it, and the rows
    set aside (see module).

    Timestamps are read in UTC (the transaction's time zone is set to UTC).
    """
    conn.execute("SET LOCAL TIME ZONE 'UTC'")
    columns = ", ".join(quote_ident(n) for n in info.schema.names)
    buffer = io.BytesIO()
    with conn.cursor().copy(f"COPY (SELECT {columns} FROM {quote_ident(info.name)}) TO STDOUT (FORMAT csv)") as copy:
        for chunk in copy:
            buffer.write(chunk)
    if not buffer.tell():
        return info.schema.empty_table(), set_aside_schema(info).empty_table()
    buffer.seek(0)
    text = csv.read_csv(
        buffer,
        read_options=csv.ReadOptions(column_names=info.schema.names),
        convert_options=csv.ConvertOptions(
            column_types={n: pa.string() for n in info.schema.names}, strings_can_be_null=True,
            quoted_strings_can_be_null=False, null_values=[""]),
    )
    arrays: list[pa.Array] = []
    bad: dict[int, str] = {}   # row -> why it does not decode
    for f, pg_type in zip(info.schema, info.pg_types or [""] * len(info.schema)):
        column = text.column(f.name).combine_chunks()
        if pg_type == "numeric":  # read as text: its NaN and infinities read as null, as in the changes
            column = pc.if_else(pc.is_in(column, pa.array(NON_FINITE)), pa.scalar(None, pa.string()), column)
        elif pg_type == "bytea":  # hex digits without the leading \x, as wal2json writes them
            column = pc.utf8_slice_codeunits(column, 2)
        array, failed = from_text(column, f.type)
        arrays.append(array)
        for i, reason in failed.items():
            bad.setdefault(i, f"column {f.name}: {reason}")
    rows = pa.Table.from_arrays(arrays, schema=info.schema)
    if not bad:
        return rows, set_aside_schema(info).empty_table()
    keep = pa.array([i not in bad for i in range(rows.num_rows)])
    aside = text.filter(pc.invert(keep)).append_column("_reason", pa.array([bad[i] for i in sorted(bad)], pa.string()))
    return rows.filter(keep), aside


def set_aside_schema(info: TableInfo) -> pa.Schema:
    """The columns of a snapshot's rows set aside: each column as text, and ``_reason``."""
    return pa.schema([pa.field(n, pa.string()) for n in info.schema.names] + [pa.field("_reason", pa.string())])
