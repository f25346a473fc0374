"""Column defaults: the value rows held from before a column was added read for it.

Spark records the default of a column added with ``ALTER TABLE ... ADD COLUMN c T DEFAULT v`` in
the column's metadata as ``EXISTS_DEFAULT`` (a SQL literal, e.g. ``0``, ``'EU'``, ``DATE
'2024-01-01'``) and reads rows of the files written before the column existed with it. A join's
state holds rows of its inputs from before such a change the same way: a column added to an input
whose field carries ``EXISTS_DEFAULT`` (its Spark ``StructField.metadata``, kept by the
DataFrame a table or ``col.alias(name, metadata={"EXISTS_DEFAULT": "0"})`` gives; in process, the
pyarrow field's metadata) reads that value in the rows stored before it, and null without one.

A join's definition lists an input's columns as ``[name, type]``, or ``[name, type, default]``
for a column with a default (:func:`column_entries`); :func:`entries_schema` turns the list back
into fields carrying the default, which :func:`streamjoin.runtime.evolution.as_schema` fills in.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from typing import Any, Sequence

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.views import arrow_type

__all__ = ["EXISTS_DEFAULT", "default_text", "default_value", "column_entries", "entry_pairs", "entry_defaults",
           "entries_schema", "with_defaults", "fill"]

#: The field metadata key Spark keeps a column's existence default under.
EXISTS_DEFAULT = "EXISTS_DEFAULT"
_KEY = EXISTS_DEFAULT.encode()
_NUMBER = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)(Y|S|L|BD|D|F)?", re.IGNORECASE)
_TYPED = re.compile(r"(DATE|TIMESTAMP|TIMESTAMP_NTZ|TIMESTAMP_LTZ)\s*('.*')", re.IGNORECASE | re.DOTALL)
_CAST = re.compile(r"CAST\s*\((.*)\s+AS\s+[\w(), ]+\)", re.IGNORECASE | re.DOTALL)


def default_text(field: pa.Field) -> str | None:
    """The ``EXISTS_DEFAULT`` literal of ``field`` (None: it has none)."""
    found = (field.metadata or {}).get(_KEY)
    return None if found is None else found.decode()


def default_value(text: str, type_: pa.DataType, column: str) -> pa.Scalar:
    """The literal ``text`` as a value of ``type_``. Raises :class:`JoinDefinitionError` naming
    ``column`` for a literal this reads not (the forms Spark writes: numbers with their ``Y S L
    BD D F`` suffixes, quoted strings, ``TRUE``/``FALSE``/``NULL``, ``DATE '...'``,
    ``TIMESTAMP '...'`` (UTC) and ``TIMESTAMP_NTZ '...'``, ``X'...'``, ``CAST(literal AS type)``)
    or one that is not a value of the type."""
    try:
        value = _literal(text.strip())
        return pa.scalar(value).cast(type_) if value is not None else pa.scalar(None, type_)
    except (ValueError, TypeError, ArithmeticError, pa.ArrowException) as exc:
        raise JoinDefinitionError(
            f"column {column!r}: its default ({EXISTS_DEFAULT} metadata) {text!r} is not a literal of type {type_} "
            f"streamjoin reads ({exc}); give a literal such as 0, 'text', TRUE, DATE '2024-01-01' or "
            "TIMESTAMP '2024-01-01 00:00:00'") from None


def _literal(text: str) -> Any:
    cast = _CAST.fullmatch(text)
    if cast:
        return _literal(cast.group(1).strip())
    upper = text.upper()
    if upper == "NULL":
        return None
    if upper in ("TRUE", "FALSE"):
        return upper == "TRUE"
    if text.startswith("'"):
        return _quoted(text)
    if upper.startswith("X'"):
        return bytes.fromhex(_quoted(text[1:]))
    typed = _TYPED.fullmatch(text)
    if typed:
        kind, value = typed.group(1).upper(), _quoted(typed.group(2))
        if kind == "DATE":
            return dt.date.fromisoformat(value)
        stamp = dt.datetime.fromisoformat(value)
        if kind != "TIMESTAMP_NTZ" and stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.timezone.utc)
        return stamp
    number = _NUMBER.fullmatch(text)
    if number:
        digits, suffix = number.group(1), (number.group(2) or "").upper()
        if suffix == "BD" or (not suffix and "." in digits and "e" not in digits.lower()):
            return decimal.Decimal(digits)
        if suffix in ("D", "F") or "e" in digits.lower() or "." in digits:
            return float(digits)
        return int(digits)
    raise ValueError("not a literal")


def _quoted(text: str) -> str:
    if len(text) < 2 or not (text.startswith("'") and text.endswith("'")):
        raise ValueError("an unterminated string")
    return text[1:-1].replace("''", "'").replace("\\'", "'").replace("\\\\", "\\")


def column_entries(schema: pa.Schema) -> list[list[str]]:
    """``schema``'s columns as a definition lists them: ``[name, type]``, with the default as a
    third item for a column that has one (checked: :func:`default_value`)."""
    out = []
    for field in schema:
        text = default_text(field)
        if text is None:
            out.append([field.name, str(field.type)])
        else:
            default_value(text, field.type, field.name)
            out.append([field.name, str(field.type), text])
    return out


def entry_pairs(entries: Sequence[Sequence[Any]]) -> list[tuple[str, str]]:
    """``(name, type)`` of each entry of a definition's column list."""
    return [(str(e[0]), str(e[1])) for e in entries]


def entry_defaults(entries: Sequence[Sequence[Any]]) -> dict[str, str]:
    """The default of each entry that has one, by column name."""
    return {str(e[0]): str(e[2]) for e in entries if len(e) > 2}


def entries_schema(entries: Sequence[Sequence[Any]]) -> pa.Schema:
    """The fields a definition's column list names, a default kept in each field's metadata."""
    return pa.schema([pa.field(str(e[0]), arrow_type(str(e[1])),
                               metadata={_KEY: str(e[2]).encode()} if len(e) > 2 else None) for e in entries])


def with_defaults(schema: pa.Schema, source: pa.Schema) -> pa.Schema:
    """``schema`` with the default of each column of ``source`` of the same name (a schema built
    from an input's, e.g. the columns a join keeps, keeps its defaults)."""
    found = {f.name: f.metadata for f in source if default_text(f) is not None}
    if not found:
        return schema
    return pa.schema([f.with_metadata({**(f.metadata or {}), **found[f.name]}) if f.name in found else f
                      for f in schema])


def fill(field: pa.Field, rows: int) -> pa.Array:
    """A column of ``rows`` values for ``field`` where the rows have none: its default, or nulls."""
    text = default_text(field)
    if text is None:
        return pa.nulls(rows, field.type)
    return pa.repeat(default_value(text, field.type, field.name), rows)
