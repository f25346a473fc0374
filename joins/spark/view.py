"""``view_sink``: keep a table-table join's view up to date from ``writeStream.foreachBatch``.

    changes = table_table_join(posts, follows, ..., left_key="post_id", right_key="follow_id")
    sink = view_sink("/data/timeline-view", left_key="post_id", right_key="follow_id", schema=changes)
    changes.writeStream.foreachBatch(sink).option("checkpointLocation", ...).start()
    ...
    sink.rows()                          # the whole view as an Arrow table
    sink.get(post_id, follow_id)         # one view row as a dict, or None
    sink.write_parquet("timeline.parquet")

**Contract.** The view lives on the driver: each micro-batch's view changes are collected to the
driver as Arrow and applied to a ``streamjoin.view.MaterializedView`` in a local store at
``path``. That suits views that fit one machine's disk (the store's bulk is in files it
maps, not in its memory); a larger view belongs in a table format written by the executors. The store's
version marker is the last micro-batch id applied, and a micro-batch is applied in one atomic
store write, so a batch id not newer than the store's version is skipped: a micro-batch that
Spark runs again after a failure (the same id) is not applied twice. Batch ids must increase,
as Spark's do; a restarted query must keep both its checkpoint and ``path``.

**Spark Connect.** A Connect query's ``foreachBatch`` function runs where the Connect server
runs, not in the client: the sink is pickled (its own store handle closed) and its copy there
applies the batches to the view at ``path`` on the server's machine. Read the view there, or, with
a local server, with this sink (or a new ``view_sink(path, ...)``) once the query has stopped.
"""

from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from streamjoin.spark.runtime import arrow_schema
from streamjoin.statestore import open_store
from streamjoin.statestore.registry import DEFAULT_KIND
from streamjoin.table.spec import COMMIT_VERSION, SEQ_COLUMN
from streamjoin.view import MaterializedView

__all__ = ["ViewSink", "view_sink"]


class ViewSink:
    """A ``foreachBatch`` function that applies view changes to a driver-local view (see module)."""

    def __init__(self, path: str, *, left_key: str | Sequence[str], right_key: str | Sequence[str],
                 schema: pa.Schema | StructType | DataFrame, store: str = DEFAULT_KIND) -> None:
        """``schema``: the change stream's schema (Arrow or Spark), or the change stream itself."""
        if isinstance(schema, DataFrame):
            schema = arrow_schema(schema)
        elif isinstance(schema, StructType):
            from pyspark.sql.pandas.types import to_arrow_schema

            schema = to_arrow_schema(schema, timezone="UTC")
        self.path = path
        self.store_kind = store
        self._args = (left_key, right_key, schema)
        self._view: MaterializedView | None = MaterializedView(open_store(store, path), left_key, right_key, schema)
        #: Change counts by type of the batches applied by this sink object, per batch id.
        self.applied: dict[int, dict[str, int]] = {}

    @property
    def view(self) -> MaterializedView:
        """The view, its store opened again if this sink was pickled (see the module on Connect)."""
        if self._view is None:
            self._view = MaterializedView(open_store(self.store_kind, self.path), *self._args)
        return self._view

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Spark Connect query's ``foreachBatch`` runs a copy where the server runs):
        this sink's store is closed, so that the copy can open it; this sink opens it again on its
        next use, which the store refuses while the query's copy holds it."""
        if self._view is not None:
            self._view.store.close()
            self._view = None
        state = self.__dict__.copy()
        return state

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Apply micro-batch ``batch_id`` (a DataFrame of view changes); skip it if already applied."""
        if self.has_applied(batch_id):
            return
        self.apply(df.toArrow(), batch_id)

    def has_applied(self, batch_id: int) -> bool:
        """True when the view already holds batch ``batch_id`` (its version is at least the id)."""
        version = self.view.store.version
        return version is not None and version >= batch_id

    def apply(self, changes: pa.Table, batch_id: int) -> dict[str, int] | None:
        """Apply one micro-batch's changes (Arrow); counts by change type, or None when skipped.

        Raises ``streamjoin.view.ViewError`` (nothing written) for changes that do not fit the view,
        and ValueError for a change whose ``_commit_version`` is after ``batch_id``.
        """
        if self.has_applied(batch_id):
            return None
        if COMMIT_VERSION in changes.column_names and changes.num_rows:
            if pc.max(changes.column(COMMIT_VERSION)).as_py() > batch_id:
                raise ValueError(f"micro-batch {batch_id} holds changes of a later {COMMIT_VERSION}")
        counts = self.view.apply(_as_version(changes, batch_id))   # one atomic write, version marker = batch_id
        if not changes.num_rows:
            self.view.store.write(version=batch_id)
        self.applied[batch_id] = counts
        return counts

    @property
    def version(self) -> int | None:
        """The last micro-batch id applied, or None before the first."""
        return self.view.store.version

    def rows(self) -> pa.Table:
        """The whole view, in view-key order."""
        return self.view.rows()

    def get(self, left_pk: Any, right_pk: Any) -> dict[str, Any] | None:
        """One view row by (left primary key, right primary key), or None."""
        return self.view.get(left_pk, right_pk)

    def write_parquet(self, path: str, **options: Any) -> None:
        """Write the whole view to one Parquet file."""
        self.view.write_parquet(path, **options)

    def close(self) -> None:
        if self._view is not None:
            self._view.store.close()
            self._view = None

    def __enter__(self) -> "ViewSink":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"ViewSink({self.path!r}, left_key={list(self.view.left_key)!r}, "
                f"right_key={list(self.view.right_key)!r}, schema=<schema>, store={self.store_kind!r})")


def _as_version(changes: pa.Table, batch_id: int) -> pa.Table:
    """``changes`` in their (``_commit_version``, ``_seq``) order, renumbered as version ``batch_id``.

    A table-table join's micro-batch already is one version equal to the batch id; renumbering makes
    the view's version marker the batch id whatever the changes' versions were.
    """
    if not changes.num_rows or not {COMMIT_VERSION, SEQ_COLUMN} <= set(changes.column_names):
        return changes    # MaterializedView.apply names missing columns
    order = pc.sort_indices(changes, sort_keys=[(COMMIT_VERSION, "ascending"), (SEQ_COLUMN, "ascending")])
    changes = changes.take(order)
    for name, values in ((COMMIT_VERSION, [batch_id] * changes.num_rows), (SEQ_COLUMN, range(changes.num_rows))):
        index = changes.schema.get_field_index(name)
        changes = changes.set_column(index, name, pa.array(values, changes.schema.field(index).type))
    return changes


def view_sink(path: str, *, left_key: str | Sequence[str], right_key: str | Sequence[str],
              schema: pa.Schema | StructType | DataFrame, store: str = DEFAULT_KIND) -> ViewSink:
    """A ``foreachBatch`` function keeping the view of a table-table join's change stream at ``path``.

    See ``streamjoin.spark.view`` for the contract (a driver-local view, each batch id applied once).

    Args:
        path: Where the view's store lives (on the driver).
        left_key: The left table's primary key.
        right_key: The right table's primary key.
        schema: The change stream's schema (an Arrow schema, a Spark schema, or the DataFrame).
        store: The store backend of the view (default ``arranged``).

    Returns:
        The [`ViewSink`][streamjoin.spark.view.ViewSink] to pass to ``foreachBatch``.
    """
    return ViewSink(path, left_key=left_key, right_key=right_key, schema=schema, store=store)
