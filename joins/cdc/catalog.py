"""What the source needs to know about the database: wal_level, and each table's columns and key.

:func:`table_info` reads a table's columns (as an Arrow schema) and primary key from the catalog
and refuses a table whose changes could not be keyed (no primary key, or a replica identity of
``NOTHING``, whose deletes log no key). PostgreSQL types map to Arrow types as in :data:`ARROW_TYPES`
(``numeric(p, s)`` to ``decimal128(p, s)``, its text past 38 digits, Spark's limit); any other
type is read as its text form. The documentation's page "PostgreSQL change data capture: design"
lists how each type arrives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from streamjoin.cdc.errors import SourceSetupError

__all__ = ["TableInfo", "table_info", "check_wal_level", "arrow_type", "ARROW_TYPES"]

#: PostgreSQL type name (as ``format_type`` spells it, without a modifier) -> Arrow type.
ARROW_TYPES: dict[str, pa.DataType] = {
    "smallint": pa.int16(), "integer": pa.int32(), "bigint": pa.int64(),
    "real": pa.float32(), "double precision": pa.float64(), "boolean": pa.bool_(),
    "text": pa.string(), "character varying": pa.string(), "character": pa.string(), "uuid": pa.string(),
    "date": pa.date32(), "timestamp without time zone": pa.timestamp("us"),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
}


@dataclass(frozen=True)
class TableInfo:
    """A table's qualified name (``schema.table``), its columns as Arrow, its primary key, and its
    columns' PostgreSQL types (``format_type`` text)."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    pg_types: tuple[str, ...] = ()

    @property
    def wal2json_name(self) -> str:
        """The name as wal2json's ``add-tables`` option takes it (dots and commas escaped)."""
        nsp, _, rel = self.name.partition(".")
        return f"{_escape(nsp)}.{_escape(rel)}"


def _escape(name: str) -> str:
    return "".join("\\" + c if c in ".,\\ " else c for c in name)


def arrow_type(pg_type: str) -> pa.DataType:
    """The Arrow type a value of ``pg_type`` (``format_type`` text, e.g. ``numeric(10,2)``) reads as."""
    if pg_type.startswith("numeric(") and pg_type.endswith(")"):
        precision, _, scale = pg_type[len("numeric("):-1].partition(",")
        if int(precision) <= 38:  # Spark's largest decimal
            return pa.decimal128(int(precision), int(scale or 0))
        return pa.string()
    base = pg_type.split("(")[0].strip()
    return ARROW_TYPES.get(base, pa.string())


def check_wal_level(conn: Any) -> None:
    """Raise :class:`SourceSetupError` unless the server decodes its log (``wal_level = logical``)."""
    level = conn.execute("SHOW wal_level").fetchone()[0]
    if level != "logical":
        raise SourceSetupError(
            f"the server's wal_level is {level!r}, so it cannot decode changes: set wal_level = logical in "
            "postgresql.conf (or ALTER SYSTEM SET wal_level = logical) and restart the server")


_COLUMNS = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
       coalesce(a.attnum = ANY(pk.conkey), false), c.relreplident, true
FROM pg_class c
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_constraint pk ON pk.conrelid = c.oid AND pk.contype = 'p'
WHERE c.oid = to_regclass(%s)
ORDER BY a.attnum
"""


def table_info(conn: Any, table: str) -> TableInfo:
    """The columns and primary key of ``table`` (``name`` or ``schema.name``).

    Raises :class:`SourceSetupError` when the table does not exist, or has no primary key (the
    joins key each change by it) or ``REPLICA IDENTITY NOTHING`` (its deletes log no key).
    """
    qualified = table if "." in table else f"public.{table}"
    rows = conn.execute(_COLUMNS, (qualified,)).fetchall()
    if not rows:
        raise SourceSetupError(f"table {qualified} does not exist (or this user cannot see it); "
                               "name an existing table as schema.table")
    key = tuple(name for name, _, _, in_key, _, _ in rows if in_key)
    if not key or rows[0][4] == "n":
        raise SourceSetupError(
            f"table {qualified} has no primary key or replica identity, so its updates and deletes cannot "
            f"be decoded: add a primary key (ALTER TABLE {qualified} ADD PRIMARY KEY (...))")
    fields = [pa.field(name, arrow_type(pg_type), nullable=not not_null) for name, pg_type, not_null, *_ in rows]
    return TableInfo(qualified, pa.schema(fields), key, tuple(pg_type for _, pg_type, *_ in rows))
