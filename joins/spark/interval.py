"""``interval_join``: the stream-stream interval join for PySpark DataFrames (docs/semantics.md "Interval join")."""

from __future__ import annotations

from typing import Any, Mapping, Sequence, Union

from pyspark.sql import DataFrame

from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.interval.spec import Duration
from streamjoin.runtime.partition import StateConfig
from streamjoin.spark.checks import check_columns, check_time
from streamjoin.spark.runtime import arrow_schema, run_operator

__all__ = ["interval_join"]

On = Union[str, Sequence[str], tuple[Sequence[str], Sequence[str]]]


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
    how: str = "inner",
    store: str = "rocksdb",
    checkpoint: str | None = None,
    partitions: int | None = None,
    store_options: Mapping[str, Any] | None = None,
    state_dir: str | None = None,
) -> DataFrame:
    """Join two event DataFrames on equal keys within a time window.

    A left row ``l`` and a right row ``r`` match when their ``on`` columns are equal (a null never
    matches) and ``l[left_time] + lower <= r[right_time] <= l[left_time] + upper`` (both bounds
    inclusive; either may be negative). ``how``: inner, left, right, full, left_semi, left_anti, or
    Spark's spellings of them (``left_outer``, ``full_outer``, ``outer``, ``semi``, ``anti``, ...);
    ``lower``, ``upper`` and ``delay`` are timedeltas or Spark interval strings (``"10 minutes"``).
    The watermark is ``min(largest left time, largest right time) - delay`` over earlier
    micro-batches; rows older than it are late: they never join and are written, with the
    reason, to the checkpoint's set-aside output (:func:`streamjoin.set_aside_rows`). Unmatched rows of
    outer joins are emitted once the watermark has passed their window.

    Output columns: the key columns once (named as on the left), then the left columns, then the
    right columns; a non-key name on both sides becomes ``name_left`` / ``name_right``. Semi and
    anti joins output the left columns. ``checkpoint`` (a path or ``pyarrow.fs`` URI) is required
    for streaming inputs; ``partitions`` defaults to ``spark.sql.shuffle.partitions``; ``store``
    is ``rocksdb``, ``lmdb``, ``memory`` or ``package.module:Class``; local stores live under
    ``state_dir`` (default: under Spark's local directory). Raises
    :class:`streamjoin.errors.JoinDefinitionError` before any query starts when an argument is wrong.
    """
    left_on, right_on = _split_on(on)
    check_columns(left, "left", list(left_on) + [left_time])
    check_columns(right, "right", list(right_on) + [right_time])
    check_time(left, "left_time", left_time)
    check_time(right, "right_time", right_time)
    operator = IntervalJoin(
        arrow_schema(left), arrow_schema(right), (list(left_on), list(right_on)),
        left_time=left_time, right_time=right_time, lower=lower, upper=upper, delay=delay, how=how,
    )
    state = StateConfig(store=store, store_options=dict(store_options or {}), local_dir=state_dir)
    return run_operator([left, right], operator, checkpoint=checkpoint, partitions=partitions, state=state)


def _split_on(on: On) -> tuple[Sequence[str], Sequence[str]]:
    if isinstance(on, str):
        return (on,), (on,)
    if isinstance(on, tuple) and len(on) == 2 and all(isinstance(x, (list, tuple)) for x in on):
        left_on, right_on = on
        if len(left_on) != len(right_on) or not left_on:
            raise JoinDefinitionError(f"on=(left names, right names) needs two non-empty lists of one length, got {on!r}")
        return tuple(left_on), tuple(right_on)
    if isinstance(on, (list, tuple)) and on and all(isinstance(x, str) for x in on):
        return tuple(on), tuple(on)
    raise JoinDefinitionError(
        f"on must be a column name, a list of names, or a pair of lists (left names, right names); got {on!r}"
    )
