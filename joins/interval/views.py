"""The interval join's state as ``read_state`` shows it (:mod:`streamjoin.runtime.views`).

``left`` / ``right``: the buffered rows of that side (its stored columns, with their event time),
``_matched`` (null on a side whose matches the join does not record: only outer, semi and anti
sides record them) and ``_watermark`` (the partition's watermark after the version).
"""

from __future__ import annotations

from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.interval.spec import ROW_ID
from streamjoin.interval.state import read_watermark, scan_groups
from streamjoin.runtime.defaults import entries_schema
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.runtime.views import TS, StateView
from streamjoin.statestore.base import Store

__all__ = ["VIEWS"]

#: The sides whose matches an interval join records (those whose unmatched rows it outputs), by ``how``.
_MARKED = {"left": ("left",), "right": ("right",), "full": ("left", "right"), "left_semi": ("left",),
           "left_anti": ("left",)}


def _view(side: str) -> StateView:
    def schema(definition: Mapping[str, Any]) -> list[pa.Field]:
        plan = definition[side]
        columns = {f.name: f for f in entries_schema(plan["columns"])}   # (with their defaults)
        return [columns[n] for n in plan["stored"]] + [pa.field("_matched", pa.bool_()),
                                                                   pa.field("_watermark", TS)]

    def read(store: Store, definition: Mapping[str, Any], columns: pa.Schema) -> pa.Table:
        marked_side = side in _MARKED.get(definition["how"], ())
        watermark = read_watermark(store)
        out = []
        # every blob in the newest columns, whatever schema of the side it was written under
        stored = pa.schema(list(columns)[:-2] + [pa.field(ROW_ID, pa.int64())])
        for group in scan_groups(store, side, [(None, None)], max_rows=1 << 20, schema=stored):
            marked = pa.array(sorted({int(i) for ids in group.marks for i in ids}), pa.int64())
            for table in group.tables:
                matched = pc.is_in(table.column(ROW_ID), value_set=marked) if marked_side \
                    else pa.nulls(table.num_rows, pa.bool_())
                out.append(table.append_column("_matched", matched))
        if not out:
            return columns.empty_table()
        rows = pa.concat_tables(out, promote_options="default")
        mark = None if watermark in (NEG_INF, POS_INF) else watermark
        rows = rows.append_column("_watermark", pa.array([mark] * rows.num_rows, pa.int64()).cast(TS))
        return rows.select(columns.names).cast(columns)

    return StateView(schema, read)


VIEWS = {"left": _view("left"), "right": _view("right")}
