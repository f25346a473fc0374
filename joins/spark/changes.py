"""Change streams in Spark: choosing a vocabulary, and turning Debezium envelopes into the plain form.

The runtime routes rows by top-level key columns. Delta change data feed and plain change tables
have them; a Debezium envelope keeps its key inside ``before``/``after`` (or inside a JSON string),
so :func:`plain_changes` runs :func:`streamjoin.changes.normalise` and :func:`streamjoin.changes.to_plain`
over each source partition first (a ``mapInArrow`` before the shuffle, no extra shuffle). The rows
that step refuses (unknown op, null key or change time, invalid JSON) are written, with their
reason, to the checkpoint's set-aside output of input ``table_source``
(``set_aside_rows(spark, checkpoint, "table_source")``).
"""

from __future__ import annotations

import logging
from typing import Iterator, Sequence

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StringType, StructType

from streamjoin.changes import PLAIN_COLUMNS, ChangeFormat, Vocabulary, normalise, to_plain
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.spark.runtime import arrow_schema

__all__ = ["change_format", "plain_changes", "SOURCE_INPUT"]

log = logging.getLogger("streamjoin")

#: The set-aside input name of change rows refused before routing (Debezium envelopes).
SOURCE_INPUT = "table_source"


def change_format(
    df: DataFrame, changes: str | ChangeFormat | None, key: Sequence[str], time: str | None,
    sequence: str | None = None, argument: str = "table_changes",
) -> ChangeFormat:
    """The :class:`ChangeFormat` of ``df``: given, named (``plain``, ``delta``, ``debezium``), or
    detected from its columns (``_change_type``: Delta; ``op`` with an ``after`` struct: Debezium;
    an ``op`` column: plain). ``time`` names the change-time column: required for plain; for Delta
    any timestamp column (default ``_commit_timestamp``; ties broken by ``sequence``, default
    ``_commit_version``); for Debezium a top-level timestamp column or integer milliseconds
    (default ``ts_ms``; ``ts_us`` is read as microseconds). Raises :class:`JoinDefinitionError`
    saying how to choose."""
    if isinstance(changes, ChangeFormat):
        if tuple(key) != changes.key:
            raise JoinDefinitionError(f"the key {list(key)} differs from the ChangeFormat's key {list(changes.key)}")
        return changes
    columns = set(df.columns)
    if changes is None:
        if "_change_type" in columns:
            changes = "delta"
        elif "op" in columns and isinstance(_type(df, "after"), StructType):
            changes = "debezium"
        elif "op" in columns:
            changes = "plain"
        else:
            raise JoinDefinitionError(
                f"cannot tell the vocabulary of {argument} (columns {df.columns}): expected a Delta change "
                "data feed (_change_type), a Debezium envelope (op, before, after) or a plain change table "
                "(an 'op' column); pass changes='plain'|'delta'|'debezium' or a streamjoin.changes.ChangeFormat "
                "(ChangeFormat.debezium_json(key, row_schema) for JSON strings)"
            )
    if changes == "delta":
        return ChangeFormat.delta(key, time=time or "_commit_timestamp", sequence=sequence)
    if changes == "debezium":
        time = time or "ts_ms"
        return ChangeFormat.debezium(key, time=time, time_unit="us" if time == "ts_us" else "ms", sequence=sequence)
    if changes == "plain":
        if time is None:
            raise JoinDefinitionError(f"a plain change table needs its change-time column: pass the time column of {argument}")
        return ChangeFormat.plain(key, time=time, sequence=sequence)
    if changes == "debezium_json":
        raise JoinDefinitionError("JSON Debezium envelopes need their row schema: pass "
                                  "changes=ChangeFormat.debezium_json(key, row_schema)")
    raise JoinDefinitionError(f"unknown changes={changes!r}; use 'plain', 'delta', 'debezium' or a ChangeFormat")


def _type(df: DataFrame, name: str):
    return df.schema[name].dataType if name in df.columns else None


def plain_changes(
    df: DataFrame, fmt: ChangeFormat, checkpoint: str, input_name: str = SOURCE_INPUT
) -> tuple[DataFrame, ChangeFormat]:
    """``df`` unchanged for vocabularies with top-level keys; Debezium turned into the plain form
    (with :data:`streamjoin.changes.PLAIN_COLUMNS`), its refused rows written to the checkpoint's
    set-aside output ``input_name``."""
    if fmt.vocabulary in (Vocabulary.PLAIN, Vocabulary.DELTA):
        return df, fmt
    if fmt.vocabulary is Vocabulary.DEBEZIUM_JSON and not isinstance(_type(df, fmt.column), StringType):
        raise JoinDefinitionError(f"debezium_json needs a string column {fmt.column!r} in the change table; "
                                  f"its columns are {df.columns} (read files with spark.readStream.text)")
    source = arrow_schema(df)
    internal = fmt.internal_schema(source)
    plain_schema = to_plain(internal.empty_table(), fmt.key).schema
    stage = _ToPlain(fmt, checkpoint, source, input_name)
    plain = df.mapInArrow(stage, from_arrow_schema(plain_schema, prefer_timestamp_ntz=False))
    return plain, ChangeFormat.plain(fmt.key, **PLAIN_COLUMNS)


class _ToPlain:
    """Runs over one source partition: normalise, set aside refused rows, yield the plain form."""

    def __init__(self, fmt: ChangeFormat, checkpoint: str, schema: pa.Schema, input_name: str):
        self.fmt, self.checkpoint, self.schema, self.input_name = fmt, checkpoint, schema, input_name

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        batches = list(batches)
        table = pa.Table.from_batches(batches, self.schema) if batches else self.schema.empty_table()
        result = normalise(table, self.fmt)
        if result.aside.num_rows:
            ctx = TaskContext.get()
            batch_id = ctx.getLocalProperty("streaming.sql.batchId")
            version = int(batch_id) if batch_id is not None else 0
            Checkpoint(self.checkpoint).write_set_aside(self.input_name, version, ctx.partitionId(), result.aside)
            log.info("streamjoin: %d change rows set aside before routing: %s", result.aside.num_rows, result.counts)
        yield from to_plain(result.changes, self.fmt.key).to_batches()
