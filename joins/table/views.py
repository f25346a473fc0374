"""The table-table join's state as ``read_state`` shows it (:mod:`streamjoin.runtime.views`),
decoded through each stage's state layout.

A key stage (``table_join_keys``), side ``keys``: per primary key, the last change applied
(``_change_time``, ``_sequence``, ``_has_row``) and the row's join key (JSON arrays). The join
stage (``table_join``), sides ``left`` / ``right``: each table's current rows by (join key,
primary key), as JSON arrays of the stored values.
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa

from streamjoin.runtime.views import TS, StateView, json_text, table_of
from streamjoin.statestore.base import Store
from streamjoin.table.state import SIDE

__all__ = ["KEY_VIEWS", "ROW_VIEWS"]


def _keys_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return [pa.field("primary_key", pa.string()), pa.field("_change_time", TS), pa.field("_sequence", pa.int64()),
            pa.field("_has_row", pa.bool_()), pa.field("join_key", pa.string())]


def _read_keys(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
    from streamjoin.table.rekey import LAYOUT  # (the key stage's module declares its views from here)

    area = LAYOUT["keys"]
    rows = []
    for key, value in area.scan(store):
        (primary_key,) = area.decode(key)
        time, seq, has_row, *join_key = area.value.decode(value)
        rows.append({"primary_key": json_text(primary_key), "_change_time": time, "_sequence": seq,
                     "_has_row": bool(has_row), "join_key": json_text(join_key)})
    return table_of(rows, columns)


def _rows_schema(definition: Mapping[str, Any]) -> list[pa.Field]:
    return [pa.field("join_key", pa.string()), pa.field("primary_key", pa.string()), pa.field("row", pa.string())]


def _rows_view(side: str) -> StateView:
    def read(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
        area, width = SIDE[side], len(definition[side]["on"])
        rows = []
        for key, value in area.scan(store):
            (values,) = area.decode(key)   # the join key's values, then the primary key's
            rows.append({"join_key": json_text(values[:width]), "primary_key": json_text(values[width:]),
                         "row": json_text(area.value.decode(value))})
        return table_of(rows, columns)

    return StateView(_rows_schema, read)


KEY_VIEWS = {"keys": StateView(_keys_schema, _read_keys)}
ROW_VIEWS = {"left": _rows_view("left"), "right": _rows_view("right")}
