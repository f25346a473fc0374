"""``interval_join``: the stream-stream interval join for PySpark DataFrames (docs/design/semantics.md "Interval join")."""

from __future__ import annotations

from typing import Any, Mapping

from pyspark.sql import DataFrame

from streamjoin.interval.operator import IntervalJoin
from streamjoin.kit.how import How, IntervalHow
from streamjoin.kit.on import On, parse_on
from streamjoin.kit.times import Duration
from streamjoin.kit.watermark import WatermarkPolicy
from streamjoin.runtime.options import EndOfRun, JoinOptions
from streamjoin.spark.checks import check_columns, check_time, check_watermark
from streamjoin.spark.plan import run_plan
from streamjoin.spark.runtime import arrow_schema, resolve_checkpoint
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["interval_join"]


def interval_join(
    left: DataFrame,
    right: DataFrame,
    on: On,
    *,
    left_time: str,
    right_time: str,
    lower: Duration,
    upper: Duration,
    delay: Duration,
    how: IntervalHow | How = "inner",
    store: str = DEFAULT_KIND,
    checkpoint: str | None = None,
    partitions: int | None = None,
    store_options: Mapping[str, Any] | None = None,
    state_dir: str | None = None,
    max_partitions: int | None = None,
    left_delay: Duration | None = None,
    right_delay: Duration | None = None,
    watermark_policy: WatermarkPolicy = "min",
    end_of_run: EndOfRun | None = None,
    heartbeats: bool = False,
    idle_timeout: Duration | None = None,
    initial_state: Mapping[str, DataFrame] | None = None,
    initial_progress: Mapping[str, Any] | None = None,
) -> DataFrame:
    """Join two event DataFrames on equal keys within a time window.

    A left row ``l`` and a right row ``r`` match when their ``on`` columns are equal (a null never
    matches) and ``l[left_time] + lower <= r[right_time] <= l[left_time] + upper`` (both bounds
    inclusive; either may be negative). The watermark is ``min(largest left time, largest right
    time) - delay`` over earlier micro-batches; rows older than it are late: they never join and
    are written, with the reason, to the checkpoint's set-aside output
    ([`set_aside_rows`][streamjoin.spark.outputs.set_aside_rows]). Unmatched rows of outer joins are
    emitted once the watermark has passed their window (docs/design/semantics.md "Time").

    Durations (``lower``, ``upper``, the delays, ``idle_timeout``) are timedeltas or Spark interval
    strings (``"10 minutes"``).

    Args:
        left: The left events, streaming or batch.
        right: The right events, streaming or batch.
        on: The key: a column name, a list of names on both sides, or a pair (left names, right names).
        left_time: The left event-time column.
        right_time: The right event-time column.
        lower: The window's lower bound, relative to the left row's time.
        upper: The window's upper bound, relative to the left row's time.
        delay: How late an event may arrive and still join (the watermark's delay).
        how: ``inner``, ``left``, ``right``, ``full``, ``left_semi``, ``left_anti``, or Spark's
            spellings of them (``left_outer``, ``full_outer``, ``outer``, ``semi``, ``anti``, ...).
        store: ``arranged`` (the default: sorted columns, a base mapped from files), ``rocksdb``
            or ``lmdb`` (the same, its runs held in RocksDB or LMDB), ``rocksdb-kv``, ``lmdb-kv``,
            ``memory`` or ``package.module:Class``.
        checkpoint: A path or ``pyarrow.fs`` URI; required for streaming inputs. A batch join
            without one keeps its state and the rows it sets aside (a null key or time) in a new
            temporary directory, named in the ``streamjoin`` logger's INFO message; give one to
            read those rows with ``set_aside_rows``.
        partitions: Defaults to ``spark.sql.shuffle.partitions``.
        store_options: Options passed to the store backend.
        state_dir: Where local stores live (default: under Spark's local directory).
        max_partitions: The most partitions the join can later be restarted with (default 4096;
            its key groups, fixed when the checkpoint is created; docs/design/runtime.md
            "Partitions and rescaling").
        left_delay: Overrides ``delay`` for the left input (its watermark is its largest time
            minus its delay).
        right_delay: Overrides ``delay`` for the right input.
        watermark_policy: How the two watermarks combine, as Spark's ``multipleWatermarkPolicy``:
            ``"min"`` (default: outer rows wait for the slower input, whose rows within their
            delay are never late) or ``"max"`` (outer rows of the faster input come out after its
            own delay; the slower input's rows below that watermark are set aside as late).
        end_of_run: Streaming inputs: what a ``trigger(availableNow=True)`` run does once it has
            read its data: ``"flush"`` (None, the default, as Spark's own join: rows its last
            batch's watermark passed come out in the same run, in one more no-data micro-batch),
            ``"hold"`` (they come out at the start of the next run; on a local or ``hdfs://``
            checkpoint the query starts no Python process for its flush) or ``"release"`` (as
            ``"flush"``, then every row held for lateness is released as a batch join releases it
            and the inputs are closed: a later run with new rows is refused;
            docs/design/end-of-input.md). A checkpoint that ran with ``"hold"``, the default
            before 0.3, keeps it, and so does a join with ``idle_timeout``, which refuses the
            other two. An ``inner`` or ``left_semi`` join emits every row in the micro-batch
            whose rows caused it, so it needs no such batch: unless ``"release"``, its query gets
            no flush source at all (what its watermark evicts goes at its next micro-batch).
        heartbeats: A row whose every column but its time column is null is a *heartbeat*,
            progress of a quiet input: its time moves the watermark like a row at that time, and
            the row is never joined, stored, output or set aside (counted as
            ``heartbeat_rows_left`` / ``heartbeat_rows_right``; docs/guides/interval.md). Without
            it (default) such a row is an ordinary row with a null key.
        idle_timeout: As Flink's ``withIdleness`` (default None: off): an input whose largest
            event time has not advanced for that long in processing time (the micro-batches'
            timestamps) stops holding the watermark, which follows the other input; when its rows
            come again it counts again, and those below the watermark are late. Results then
            depend on processing time and differ from the batch join.
        initial_state: A new checkpoint's state, by side (``left``, ``right``): batch DataFrames of
            the rows [`read_join_state`][streamjoin.spark.state.read_join_state] reads from
            another checkpoint, maybe changed. Checked before the query starts, loaded by its
            first micro-batch, which emits nothing for them; ignored by a checkpoint that has run
            (docs/operations/upgrades.md, "Starting from state").
        initial_progress: With ``initial_state``, where each input had got to, as
            [`state_progress`][streamjoin.runtime.initial_state.state_progress] reads it (or a
            ``datetime``): the first watermark is then the old checkpoint's next one.

    Returns:
        The joined rows: the key columns once (named as on the left), then the left columns, then
        the right columns; a non-key name on both sides becomes ``name_left`` / ``name_right``.
        Semi and anti joins output the left columns.

    Raises:
        JoinDefinitionError: Before any query starts, when an argument is wrong
            ([`streamjoin.errors`][streamjoin.errors]).
    """
    options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions,
                          store_options=store_options, state_dir=state_dir,
                          max_partitions=max_partitions)
    left_on, right_on = parse_on(on)
    check_columns(left, "left", list(left_on) + [left_time])
    check_columns(right, "right", list(right_on) + [right_time])
    check_time(left, "left_time", left_time)
    check_time(right, "right_time", right_time)
    operator = IntervalJoin(
        arrow_schema(left), arrow_schema(right), (list(left_on), list(right_on)),
        left_time=left_time, right_time=right_time, lower=lower, upper=upper, delay=delay, how=how,
        left_delay=left_delay, right_delay=right_delay, watermark_policy=watermark_policy,
        heartbeats=heartbeats,
        idle_timeout=idle_timeout,
    )
    for side, df, time, i, own in (("left", left, left_time, 0, left_delay), ("right", right, right_time, 1, right_delay)):
        check_watermark(df, side, time, operator.spec.delays[i], f"{side}_delay" if own is not None else "delay")
    checkpoint = resolve_checkpoint(options.checkpoint, left.isStreaming or right.isStreaming, "interval_join")
    return run_plan(operator.plan, [left, right], checkpoint=checkpoint, partitions=options.partitions,
                    state=options.state, key_groups=options.max_partitions, end_of_run=end_of_run,
                    initial_state=initial_state, initial_progress=initial_progress)

