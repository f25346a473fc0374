"""The table-table join's state as ``read_state`` shows it (:mod:`streamjoin.runtime.views`),
decoded through each stage's state layout.

A key stage (``table_join_keys``), side ``keys``: per primary key, the last change applied
(``_change_time``, ``_sequence``, ``_has_row``) and the row's join key (JSON arrays). The join
stage (``table_join``), sides ``left`` / ``right``: each table's current rows by (join key,
primary key), as JSON arrays of the stored values, in the side's current columns (a row stored
under earlier ones read in them: :mod:`streamjoin.table.layouts`). A fused join stage (``table_join_fused``):
its ``left`` / ``right`` rows, and the ``left_keys`` / ``right_keys`` of its fused sides.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from streamjoin.runtime.areas import Area
from streamjoin.runtime.views import HISTORY, TS, StateView, json_text, table_of
from streamjoin.statestore.base import Store
from streamjoin.statestore.codecs import unpack_head
from streamjoin.table.layouts import LayoutCodec
from streamjoin.table.state import KEY_AREA_PREFIX, SIDE

__all__ = ["KEY_VIEWS", "ROW_VIEWS", "FUSED_VIEWS"]


def _keys_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return [pa.field("primary_key", pa.string()), pa.field("_change_time", TS), pa.field("_sequence", pa.int64()),
            pa.field("_has_row", pa.bool_()), pa.field("join_key", pa.string())]


def _keys_view(prefix: bytes = b"", part: str | None = None) -> StateView:
    """A key stage's ``keys`` (``prefix``: before its areas' prefixes; ``part``: the fused
    definition's entry of that side, whose absence means the side has no keys here)."""
    def read(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
        if part is not None and part not in definition:
            return columns.empty_table()
        return _read_keys(store, prefix, columns, _holds_rows(definition, part))

    return StateView(_keys_schema, read)


def _keys_area(prefix: bytes) -> Area:
    from streamjoin.table.rekey import LAYOUT  # (the key stage's module declares its views from here)

    return (LAYOUT.prefixed(prefix) if prefix else LAYOUT)["keys"]


def _holds_rows(definition: Mapping[str, Any], part: str | None) -> bool:
    """Whether a fused side's key step holds the side's rows after its heads (``holds_rows``)."""
    return part is not None and bool(definition.get(part, {}).get("holds_rows"))


def _read_keys(store: Store, prefix: bytes, columns: pa.Schema, holds_rows: bool = False) -> pa.Table:
    area = _keys_area(prefix)
    rows = []
    for key, value in area.scan(store):
        (primary_key,) = area.decode(key)
        if holds_rows:   # the head, then the row; the join key is the primary key
            (time, seq, has_row), _ = unpack_head(value, 3)
            join_key = list(primary_key) if has_row else []
        else:
            time, seq, has_row, *join_key = area.value.decode(value)
        rows.append({"primary_key": json_text(primary_key), "_change_time": time, "_sequence": seq,
                     "_has_row": bool(has_row), "join_key": json_text(join_key)})
    return table_of(rows, columns)


def _rows_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return [pa.field("join_key", pa.string()), pa.field("primary_key", pa.string()), pa.field("row", pa.string())]


def _rows_view(side: str, part: str | None = None) -> StateView:
    """A join stage's rows of ``side`` (``part``: where the definition holds the join stage's;
    a fused side's key step may hold them: ``holds_rows``)."""
    def read(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
        stage = definition if part is None else definition[part]
        area, width = SIDE[side], len(stage[side]["on"])
        history = definition.get(HISTORY)
        codec = _layouts([d if part is None else d[part] for d in history] if history else [stage], side)
        held = part is not None and _holds_rows(definition, f"{side}_keys")
        if held:   # under the key step's keys: (primary key -> head, row); the join key is the primary key
            keys_area = _keys_area(KEY_AREA_PREFIX[side])
            entries = []
            for key, value in keys_area.scan(store):
                (_, _, has_row), row = unpack_head(value, 3)
                if has_row:
                    (pk,) = keys_area.decode(key)
                    entries.append((area.key(list(pk) + list(pk)), row))
        else:
            entries = list(area.scan(store))
        stored: list[tuple] = []
        if entries:   # rows of every layout in the current columns, as stored values (nested ones as structures)
            table = codec.decode_table(pa.array([v for _, v in entries], pa.binary()))
            stored = list(zip(*(codec.shown(table.column(i), i) for i in range(table.num_columns))))
        rows = []
        for (key, _), values_of_row in zip(entries, stored):
            (values,) = area.decode(key)   # the join key's values, then the primary key's
            rows.append({"join_key": json_text(values[:width]), "primary_key": json_text(values[width:]),
                         "row": json_text(values_of_row)})
        return table_of(rows, columns)

    return StateView(_rows_schema, read)


def _layouts(definitions: list[Mapping[str, Any]], side: str) -> LayoutCodec:
    """The codec of ``side``'s rows under the stage's ``definitions`` (oldest first)."""
    from streamjoin.table.spec import side_of

    return LayoutCodec([side_of(definition[side]).row_schema for definition in definitions])


KEY_VIEWS = {"keys": _keys_view()}
ROW_VIEWS = {"left": _rows_view("left"), "right": _rows_view("right")}
#: A fused join stage's (:mod:`streamjoin.table.fused`): the rows, and each fused side's keys
#: (``left_keys`` / ``right_keys``; empty for a side that keeps its key stage).
FUSED_VIEWS = {"left": _rows_view("left", "join"), "right": _rows_view("right", "join"),
               **{f"{side}_keys": _keys_view(prefix, f"{side}_keys") for side, prefix in KEY_AREA_PREFIX.items()}}
