"""State views: how ``read_state`` shows a join's state, declared by each operator class.

A :class:`StateView` turns a partition's restored state (a :class:`streamjoin.statestore.Store`)
into rows: ``schema(definition)`` gives their columns from the checkpoint's definition alone (the
Spark layer needs them before any task runs), ``read(store, definition, columns)`` decodes the
store through the operator's state layout. An operator class lists its views by side in
``state_views`` (:class:`streamjoin.runtime.operator.Operator`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pyarrow as pa

from streamjoin.errors import JoinDefinitionError
from streamjoin.statestore.base import Store

__all__ = ["StateView", "TS", "arrow_type", "json_text", "table_of"]

#: Event times in a view: UTC timestamps.
TS = pa.timestamp("us", "UTC")


#: The key under which ``read_state`` hands a view the checkpoint's definitions, oldest first,
#: when its inputs' columns evolved (:meth:`streamjoin.runtime.checkpoint.binding.Binding.history`):
#: a view whose state does not carry its schema decodes rows stored under earlier ones with it.
HISTORY = "__schema_history__"

@dataclass(frozen=True)
class StateView:
    """One side of a join's state as rows (see the module)."""

    schema: Callable[[Mapping[str, Any]], list[pa.Field]]
    read: Callable[[Store, Mapping[str, Any], pa.Schema], pa.Table]


def arrow_type(name: str) -> pa.DataType:
    """The Arrow type a definition names (``str(type)``: ``int64``, ``timestamp[us, tz=UTC]``...)."""
    if name.startswith("timestamp["):
        unit, _, tz = name[len("timestamp["):-1].partition(", tz=")
        return pa.timestamp(unit, tz or None)
    if name.startswith(("date32", "date64")):
        return pa.date32() if name.startswith("date32") else pa.date64()
    decimal = re.fullmatch(r"decimal(128|256)\((\d+), (-?\d+)\)", name)
    if decimal:
        width, precision, scale = decimal.groups()
        return (pa.decimal128 if width == "128" else pa.decimal256)(int(precision), int(scale))
    timed = re.fullmatch(r"(time32|time64|duration)\[(s|ms|us|ns)\]", name)
    if timed:
        return {"time32": pa.time32, "time64": pa.time64, "duration": pa.duration}[timed.group(1)](timed.group(2))
    fixed = re.fullmatch(r"fixed_size_binary\[(\d+)\]", name)
    if fixed:
        return pa.binary(int(fixed.group(1)))
    dictionary = re.fullmatch(r"dictionary<values=(.+), indices=(\w+), ordered=([01])>", name)
    if dictionary:
        return pa.dictionary(arrow_type(dictionary.group(2)), arrow_type(dictionary.group(1)),
                             dictionary.group(3) == "1")
    if re.match(r"(list|large_list|fixed_size_list|struct|map)<", name):
        return _nested_type(name)
    try:
        return pa.type_for_alias(name)
    except ValueError as exc:
        raise JoinDefinitionError(f"cannot read a column of type {name} recorded in a join definition") from exc


def _nested_type(name: str) -> pa.DataType:
    """A list, struct or map type from its ``str``; refused where the text does not say it
    unambiguously (a field name holding ``", "``, ``": "`` or brackets)."""
    kind: pa.DataType | None = None
    try:
        if (fixed := re.fullmatch(r"fixed_size_list<(.+)>\[(\d+)\]", name)) is not None:
            kind = pa.list_(_field(fixed.group(1)), int(fixed.group(2)))
        elif (listed := re.fullmatch(r"(large_list|list)<(.+)>", name)) is not None:
            kind = (pa.large_list if listed.group(1) == "large_list" else pa.list_)(_field(listed.group(2)))
        elif (struct := re.fullmatch(r"struct<(.*)>", name)) is not None:
            kind = pa.struct([_field(part) for part in _parts(struct.group(1))])
        elif (mapped := re.fullmatch(r"map<(.+)>", name)) is not None:
            parts = _parts(mapped.group(1))
            if len(parts) in (2, 3) and parts[2:] in ([], ["keys_sorted"]):
                kind = pa.map_(arrow_type(parts[0]), arrow_type(parts[1]), keys_sorted=len(parts) == 3)
    except (ValueError, TypeError, JoinDefinitionError):
        kind = None
    if kind is None or str(kind) != name:
        raise JoinDefinitionError(f"cannot read a column of type {name} recorded in a join definition")
    return kind


def _field(text: str) -> pa.Field:
    """A field from ``name: type`` (``not null`` after the type: not nullable)."""
    field_name, sep, kind = text.partition(": ")
    if not sep:
        raise ValueError(text)
    nullable = not kind.endswith(" not null")
    return pa.field(field_name, arrow_type(kind if nullable else kind[:-len(" not null")]), nullable)


def _parts(text: str) -> list[str]:
    """``text`` split at its top-level ``", "`` (not inside brackets)."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char in "<([":
            depth += 1
        elif char in ">)]":
            depth -= 1
        elif depth == 0 and text.startswith(", ", i):
            parts.append(text[start:i])
            start = i + 2
    return [*parts, text[start:]] if text else parts


def json_text(values: Any) -> str:
    """Key or row values as a JSON array (bytes as hex, other non-JSON values as text)."""
    return json.dumps(list(values), default=lambda v: v.hex() if isinstance(v, bytes) else str(v))


def table_of(rows: list[dict[str, Any]], columns: pa.Schema) -> pa.Table:
    """``rows`` (dicts; event times as µs) as a table of ``columns``."""
    if not rows:
        return columns.empty_table()
    table = pa.Table.from_pylist(rows)
    return pa.Table.from_arrays([table.column(f.name).cast(f.type) if f.type != TS else
                                 table.column(f.name).cast(pa.int64()).cast(TS) for f in columns], schema=columns)
