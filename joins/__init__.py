"""streamjoin's joins.

The public, PySpark-facing API (imported on first use, so the engine-free operators below import
without pyspark):

    from joins import interval_join, stream_table_join, table_table_join, set_aside_rows, join_metrics
    from joins import view_sink      # keeps a table-table join's view on the driver (foreachBatch)

Engine-free operators: :mod:`joins.interval` (stream-stream), run in-process by
:mod:`joins.local` and inside Spark by :mod:`joins.spark`.
"""

from __future__ import annotations

from typing import Any

__all__ = ["interval_join", "stream_table_join", "table_table_join", "set_aside_rows", "join_metrics", "view_sink"]

_LAZY = {
    "interval_join": "joins.spark.interval",
    "stream_table_join": "joins.spark.enrichment",
    "table_table_join": "joins.spark.table",
    "set_aside_rows": "joins.spark.outputs",
    "join_metrics": "joins.spark.outputs",
    "view_sink": "joins.spark.view",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'joins' has no attribute {name!r}")
