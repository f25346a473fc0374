"""Writing a join's state rows to its new checkpoint: ``initial_state=`` of the joins
(:mod:`streamjoin.runtime.initial_state`).

Each side's batch DataFrame (``read_state``'s rows of that side, maybe changed) is checked on the
driver before anything runs (:func:`check_initial_state`), then, when the checkpoint is bound and
has no state yet, one Spark job per side adds each row's routing key (the operator reads it from
the row, :meth:`streamjoin.runtime.operator.Operator.state_key`), routes the rows by key group as
the join routes its inputs (:func:`streamjoin.spark.routing.shuffle`) and writes each partition's
rows to the checkpoint, with their summary (:func:`write_initial_state`).
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.times import micros
from streamjoin.runtime.bind import BoundQuery
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.initial import state_name
from streamjoin.runtime.initial_state import (
    KEY_PREFIX,
    check_progress,
    check_state,
    conform_state,
    merge_summary,
    state_columns,
    with_keys,
)
from streamjoin.runtime.keygroups import routing_types
from streamjoin.runtime.operator import Operator
from streamjoin.spark.lanes import arrow_schema
from streamjoin.spark.routing import routing_key, shuffle
from streamjoin.spark.task import task_context

__all__ = ["check_initial_state", "write_initial_state"]


def check_initial_state(operator: Operator, state: Mapping[str, DataFrame], progress: Mapping[str, Any] | None
                        ) -> dict[str, int]:
    """Raise :class:`JoinDefinitionError` for a streaming DataFrame, a side the operator's state
    does not have, a missing column or one of a type that does not cast
    (:func:`streamjoin.runtime.initial_state.check_state`), or a progress naming no input; the
    summary entries of ``progress`` (values as ``state_progress`` gives them, or a ``datetime`` for a timestamp time column; naive ones are UTC)."""
    for side, df in state.items():
        if not isinstance(df, DataFrame) or df.isStreaming:
            raise JoinDefinitionError(f"initial_state[{side!r}] must be a batch DataFrame (read_state's rows)")
    check_state(operator, {side: arrow_schema(df) for side, df in state.items()})
    return check_progress(operator, {name: _micros(name, value) for name, value in (progress or {}).items()})


def _micros(name: str, value: Any) -> int | None:
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, dt.datetime):   # (naive: UTC, as pyarrow reads it)
        return micros(pa.array([value], pa.timestamp("us", "UTC")))[0].as_py()
    raise JoinDefinitionError(f"initial_progress[{name!r}] must be a datetime or microseconds since the epoch, "
                              f"not {value!r}")


def write_initial_state(state: Mapping[str, DataFrame], summary: Mapping[str, int], operator: Operator,
                        key_types: Sequence[str], bound: BoundQuery) -> dict[str, int]:
    """Route and write each side's rows (a Spark job per side) and the summary; how many rows
    each side has, by its kept name (:func:`streamjoin.runtime.checkpoint.initial.state_name`)."""
    merged = dict(summary)
    counts: dict[str, int] = {}
    types = routing_types(operator.inputs)
    for side, df in state.items():
        keyed = pa.schema(list(state_columns(operator, side))
                          + [pa.field(f"{KEY_PREFIX}{i}", t) for i, t in enumerate(types)])
        rows = df.mapInArrow(_Keyed(operator, side, keyed), from_arrow_schema(keyed, prefer_timestamp_ntz=True))
        keys = [routing_key(F.col(f"{KEY_PREFIX}{i}").cast(t), t) for i, t in enumerate(key_types)]
        routed = shuffle(rows, bound.partitions, bound.key_groups, keys)
        written = routed.mapInArrow(_Writer(operator, side, bound.uri), "rows long, summary string").collect()
        counts[state_name(side)] = sum(int(r["rows"]) for r in written)
        for r in written:
            merge_summary(merged, json.loads(r["summary"]))
    Checkpoint(bound.uri).initial.write_summary(merged)
    return counts


class _Keyed:
    """A side's rows conformed to its state columns, with their routing key columns."""

    def __init__(self, operator: Operator, side: str, schema: pa.Schema) -> None:
        self.operator, self.side, self.schema = operator, side, schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            rows = conform_state(self.operator, self.side, pa.Table.from_batches([batch]))
            yield from with_keys(self.operator, self.side, rows).cast(self.schema).to_batches()


class _Writer:
    """Writes one partition's rows of one side to the checkpoint (its rows come straight from their
    own shuffle, so its task id is its partition); yields their count and summary."""

    def __init__(self, operator: Operator, side: str, checkpoint: str) -> None:
        self.operator, self.side, self.checkpoint = operator, side, checkpoint

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        found = list(batches)
        columns = state_columns(self.operator, self.side)
        rows = conform_state(self.operator, self.side, pa.Table.from_batches(found)) if found \
            else columns.empty_table()
        summary: dict[str, int] = {}
        if rows.num_rows:
            Checkpoint(self.checkpoint).initial.write(state_name(self.side), task_context().partitionId(), rows)
            summary = self.operator.state_summary(self.side, rows)
        yield pa.RecordBatch.from_pydict({"rows": pa.array([rows.num_rows], pa.int64()),
                                          "summary": pa.array([json.dumps(summary)])})
