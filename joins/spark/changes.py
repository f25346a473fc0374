"""Change streams in Spark: choosing a table's change format, and the pre-stage before routing.

The runtime routes rows by top-level key columns. A vocabulary that keeps its key in an envelope
(:attr:`streamjoin.changes.ChangeVocabulary.needs_pre_stage`: Debezium as columns or JSON) is run
through :func:`streamjoin.changes.pre_stage` over each source partition first (a ``mapInArrow``
before the shuffle, no extra shuffle). The rows that step refuses (unknown op, null key or change
time, invalid JSON) are written, with their reason, to the checkpoint's set-aside output of input
``table_source`` (``set_aside_rows(spark, checkpoint, "table_source")``).
"""

from __future__ import annotations

import logging
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.changes import ChangeFormat, pre_stage, resolve_format, routable_format, routable_schema
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark.runtime import arrow_schema, task_context

__all__ = ["change_format", "plain_changes", "SOURCE_INPUT"]

log = logging.getLogger("streamjoin")

#: The set-aside input name of change rows refused before routing (Debezium envelopes).
SOURCE_INPUT = "table_source"


def change_format(
    df: DataFrame, changes: str | ChangeFormat | None, key: Sequence[str], time: str | None,
    sequence: str | None = None, argument: str = "table_changes", changes_argument: str = "table_format",
    time_argument: str = "table_time",
) -> ChangeFormat:
    """The :class:`ChangeFormat` of ``df``: given, named (a registered vocabulary: ``plain``,
    ``delta``, ``debezium``, ...), or detected from its columns by
    :func:`streamjoin.changes.resolve_format` (the rule every join uses). ``time`` names the
    change-time column: required for plain; for Delta any timestamp column (default
    ``_commit_timestamp``; ties broken by ``sequence``, default ``_commit_version``); for Debezium
    a top-level timestamp column or integer milliseconds (default ``ts_ms``; ``ts_us`` is read as
    microseconds). Raises :class:`JoinDefinitionError` saying how to choose."""
    return resolve_format(arrow_schema(df), changes, key, time=time, sequence=sequence, argument=argument,
                          changes_argument=changes_argument, time_argument=time_argument)


def plain_changes(
    df: DataFrame, fmt: ChangeFormat, checkpoint: str, input_name: str = SOURCE_INPUT
) -> tuple[DataFrame, ChangeFormat]:
    """``df`` unchanged for vocabularies with top-level keys; others turned into the plain form
    (with :data:`streamjoin.changes.PLAIN_COLUMNS`), their refused rows written to the checkpoint's
    set-aside output ``input_name``."""
    if not fmt.vocabulary.needs_pre_stage:
        return df, fmt
    source = arrow_schema(df)
    plain_schema = routable_schema(fmt, source)
    stage = _PreStage(fmt, checkpoint, source, input_name)
    plain = df.mapInArrow(stage, from_arrow_schema(plain_schema, prefer_timestamp_ntz=False))
    return plain, routable_format(fmt)


class _PreStage:
    """Runs over one source partition: the pre-stage, refused rows set aside, the plain form yielded."""

    def __init__(self, fmt: ChangeFormat, checkpoint: str, schema: pa.Schema, input_name: str):
        self.fmt, self.checkpoint, self.schema, self.input_name = fmt, checkpoint, schema, input_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        rows = list(batches)
        table = pa.Table.from_batches(rows, self.schema) if rows else self.schema.empty_table()
        plain, result = pre_stage(table, self.fmt)
        if result.aside.num_rows:
            ctx = task_context()
            batch_id = ctx.getLocalProperty("streaming.sql.batchId")
            version = int(batch_id) if batch_id is not None else 0
            Checkpoint(self.checkpoint).set_aside.write(self.input_name, version, ctx.partitionId(), result.aside)
            log.info("streamjoin: %d change rows set aside before routing: %s", result.aside.num_rows, result.counts)
        yield from plain.to_batches()
