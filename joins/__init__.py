"""streamjoin: stateful stream joins for PySpark pipelines.

The public API::

    from streamjoin import interval_join, stream_table_join, table_table_join
    from streamjoin import set_aside_rows, join_metrics, progress_metrics, view_sink, ChangeFormat
    from streamjoin import SPARK_SETTINGS     # the Spark settings the joins run best with
    from streamjoin import StreamjoinError     # the root of every error streamjoin raises

The PySpark-facing functions are imported on first use, so that the engine-free parts
(:mod:`streamjoin.statestore`, :mod:`streamjoin.changelog`, the operators) import without pyspark;
type checkers see their real signatures through the ``TYPE_CHECKING`` imports below. The
namespace holds the public names only (``__all__``; ``dir()`` lists exactly those).

Where things live (each a subpackage of this one):

    runtime/      the operator contract, running a partition, the checkpoint, the in-process runner
    kit           what every join shares: how, on, names, times, key types
    changes/      the change vocabularies: one class each (plain, Delta, Debezium), one registry
    interval/     the stream-stream interval join: spec, state layout, rows, operator
    enrichment/   the stream-table join: spec, state layout, step, operator
    table/        the table-table join: spec, rows, key stage, join stage, operator
    view          a table-table join's view kept up to date in a store
    spark/        the Spark layer (the only part that imports pyspark)
    testing/      reference joins for tests (the relational results the operators must give)
    statestore/, changelog/, jobs/, bench/   (the repository's top-level folders of those names)
"""

import typing as _typing

__version__ = "0.3.0"

__all__ = [
    "ChangeFormat",
    "SPARK_SETTINGS",
    "StreamjoinError",
    "__version__",
    "interval_join",
    "join_metrics",
    "progress_metrics",
    "read_join_state",
    "read_state",
    "set_aside_rows",
    "state_progress",
    "stream_table_join",
    "table_table_join",
    "view_sink",
]

if _typing.TYPE_CHECKING:  # the real signatures, for type checkers; at run time see __getattr__
    from typing import Any

    from streamjoin.changes import ChangeFormat
    from streamjoin.errors import StreamjoinError
    from streamjoin.runtime.initial_state import state_progress
    from streamjoin.spark.enrichment import stream_table_join
    from streamjoin.spark.interval import interval_join
    from streamjoin.spark.outputs import join_metrics, set_aside_rows
    from streamjoin.spark.progress import progress_metrics
    from streamjoin.spark.settings import SPARK_SETTINGS
    from streamjoin.spark.state import read_join_state, read_state
    from streamjoin.spark.table import table_table_join
    from streamjoin.spark.view import view_sink

_LAZY = {
    "ChangeFormat": "streamjoin.changes",
    "SPARK_SETTINGS": "streamjoin.spark.settings",
    "StreamjoinError": "streamjoin.errors",
    "interval_join": "streamjoin.spark.interval",
    "stream_table_join": "streamjoin.spark.enrichment",
    "table_table_join": "streamjoin.spark.table",
    "set_aside_rows": "streamjoin.spark.outputs",
    "join_metrics": "streamjoin.spark.outputs",
    "progress_metrics": "streamjoin.spark.progress",
    "read_state": "streamjoin.spark.state",
    "read_join_state": "streamjoin.spark.state",
    "state_progress": "streamjoin.runtime.initial_state",
    "view_sink": "streamjoin.spark.view",
}


def __getattr__(name: str) -> "Any":
    if name in _LAZY:
        import importlib

        try:
            module = importlib.import_module(_LAZY[name])
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] != "pyspark":
                raise
            raise ImportError(
                f"streamjoin.{name} needs PySpark 4, which is not installed here: "
                'pip install "pyspark>=4,<5" (or install streamjoin with its extra, '
                'pip install "/path/to/streamjoin[spark]"; or use the PySpark your platform provides)'
            ) from exc
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'streamjoin' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
