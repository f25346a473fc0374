"""A Spark task's input rows (:class:`streamjoin.spark.task.Arriving`): drained by a thread of their
own, each batch split into its inputs' rows as it comes. No Spark session: the batches are an
iterator here."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.spark.lanes import INPUT_TAG, NOW, Layout, split_inputs
from streamjoin.spark.task import Arriving

EVENTS = pa.schema([("user", pa.int64()), ("ts", pa.timestamp("us"))])
TABLE = pa.schema([("user", pa.int64()), ("op", pa.string()), ("at", pa.timestamp("us")), ("plan", pa.string())])
#: the events' columns in lanes 0 and 1, the table's in 0, 2, 1 and 3
LAYOUT = Layout(((0, 1), (0, 2, 1, 3)))


def _operator() -> EnrichmentJoin:
    return EnrichmentJoin(EVENTS, TABLE, "user", stream_time="ts", changes=ChangeFormat.plain("user", time="at"))


def _batch(rows: list[tuple[int, int, int, str | None, str | None]], now: int) -> pa.RecordBatch:
    """Rows of (input, user, time in seconds, op, plan), as the JVM sends them."""
    time = [dt.datetime(2026, 1, 1) + dt.timedelta(seconds=r[2]) for r in rows]
    return pa.RecordBatch.from_arrays(
        [pa.array([r[0] for r in rows], pa.int8()), pa.array([r[1] for r in rows], pa.int64()),
         pa.array(time, pa.timestamp("us")), pa.array([r[3] for r in rows], pa.string()),
         pa.array([r[4] for r in rows], pa.string()), pa.array([now] * len(rows), pa.timestamp("us", "UTC"))],
        names=[INPUT_TAG, "_sj_0", "_sj_1", "_sj_2", "_sj_3", NOW])


def test_arriving_splits_each_batch_as_it_comes_as_split_inputs_splits_them_all():
    batches = [_batch([(0, 1, 5, None, None), (1, 1, 2, "u", "pro"), (0, 2, 7, None, None)], 10),
               _batch([], 11),
               _batch([(1, 3, 1, "d", None), (0, 3, 9, None, None)], 12),
               _batch([(0, 4, 3, None, None)], 11)]
    arriving = Arriving(iter(batches), _operator(), LAYOUT)
    events, table = arriving.rows()
    expected = split_inputs(batches, _operator(), LAYOUT)
    assert events.equals(expected[0]) and table.equals(expected[1])
    assert events.column("user").to_pylist() == [1, 2, 3, 4]   # in the order the batches came
    assert table.column("plan").to_pylist() == ["pro", None]
    assert all(c.num_chunks == 1 for t in (events, table) for c in t.columns)
    assert arriving.time == 12


def test_arriving_without_rows_gives_each_input_empty():
    arriving = Arriving(iter([_batch([], 3)]), _operator(), LAYOUT)
    events, table = arriving.rows()
    assert (events.schema, table.schema, events.num_rows, table.num_rows) == (EVENTS, TABLE, 0, 0)
    assert arriving.time is None
