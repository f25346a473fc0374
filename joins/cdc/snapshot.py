"""A table's rows read in one transaction's snapshot, as Arrow (``COPY ... TO STDOUT`` in CSV).

The CSV is parsed by Arrow, every column as text first (a null is unquoted and empty, an empty
string quoted), then cast to the column's type (:func:`streamjoin.cdc.convert.from_text`).
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.csv as csv

from streamjoin.cdc.catalog import TableInfo
from streamjoin.cdc.convert import from_text

__all__ = ["read_table", "quote_ident"]


def quote_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier; ``schema.table`` quotes each part."""
    return ".".join('"' + part.replace('"', '""') + '"' for part in name.split("."))


def read_table(conn: Any, info: TableInfo) -> pa.Table:
    """Every row of ``info``'s table as the connection's current transaction sees it.

    Timestamps are read in UTC (the transaction's time zone is set to UTC).
    """
    conn.execute("SET LOCAL TIME ZONE 'UTC'")
    columns = ", ".join(quote_ident(n) for n in info.schema.names)
    buffer = io.BytesIO()
    with conn.cursor().copy(f"COPY (SELECT {columns} FROM {quote_ident(info.name)}) TO STDOUT (FORMAT csv)") as copy:
        for chunk in copy:
            buffer.write(chunk)
    if not buffer.tell():
        return info.schema.empty_table()
    buffer.seek(0)
    text = csv.read_csv(
        buffer,
        read_options=csv.ReadOptions(column_names=info.schema.names),
        convert_options=csv.ConvertOptions(
            column_types={n: pa.string() for n in info.schema.names}, strings_can_be_null=True,
            quoted_strings_can_be_null=False, null_values=[""]),
    )
    arrays = [from_text(text.column(f.name).combine_chunks(), f.type) for f in info.schema]
    return pa.Table.from_arrays(arrays, schema=info.schema)
