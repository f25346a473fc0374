"""``stream_table_join``: events enriched from a table's change stream, in PySpark (docs/design/semantics.md "Enrichment")."""

from __future__ import annotations

import datetime
from typing import Any, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.changes import ChangeFormat, VocabularyName
from streamjoin.changes.registry import format_argument
from streamjoin.enrichment.operator import EnrichmentJoin, layout_for
from streamjoin.enrichment.spec import LayoutName, Mode, ModeName
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.how import EnrichmentHow, How
from streamjoin.kit.on import column_names
from streamjoin.runtime.options import EndOfRun, JoinOptions
from streamjoin.spark.changes import SOURCE_INPUT, change_format, plain_changes
from streamjoin.spark.checks import check_columns, check_time, check_watermark, column
from streamjoin.spark.plan import run_plan
from streamjoin.spark.runtime import arrow_schema, resolve_checkpoint
from streamjoin.spark.times import as_time
from streamjoin.statestore.registry import DEFAULT_KIND

__all__ = ["stream_table_join"]


def stream_table_join(
    stream: DataFrame,
    table_changes: DataFrame,
    on: str | Sequence[str],
    *,
    stream_time: str,
    table_key: str | Sequence[str],
    table_time: str | None = None,
    how: EnrichmentHow | How = "left",
    mode: ModeName | Mode = "as_of",
    delay: datetime.timedelta | str,
    grace: datetime.timedelta | str | None = None,
    table_ttl: datetime.timedelta | str | None = None,
    bootstrap: DataFrame | None = None,
    table_format: VocabularyName | ChangeFormat | None = None,
    table_sequence: str | None = None,
    store: str = DEFAULT_KIND,
    checkpoint: str | None = None,
    partitions: int | None = None,
    store_options: Mapping[str, Any] | None = None,
    state_dir: str | None = None,
    max_partitions: int | None = None,
    stream_delay: datetime.timedelta | str | None = None,
    table_delay: datetime.timedelta | str | None = None,
    end_of_run: EndOfRun | None = None,
    heartbeats: bool = False,
    changes: VocabularyName | ChangeFormat | None = None,
    initial_state: Mapping[str, DataFrame] | None = None,
    initial_progress: Mapping[str, Any] | None = None,
    layout: LayoutName | None = None,
) -> DataFrame:
    """Enrich each event of ``stream`` with the row of a changing table that its key refers to.

    ``mode="as_of"`` (deterministic): an event at time ``t`` gets the row as it was at ``t`` (the
    key's last change at or before ``t``; after a delete, none). It waits until the table's
    watermark (its newest change or heartbeat time minus ``table_delay``) passes ``t``, or, with
    ``grace``, until the event watermark passes ``t + grace`` (then it joins what is known;
    counted as ``released_by_grace``). ``mode="latest"``: each event gets the row as of the end
    of its micro-batch's changes, at once; the result depends on the batch boundaries. Changes
    for one key apply in (change time, ``table_sequence``) order; an older or duplicate change is
    stale and ignored (counted). Late events (older than the event watermark), late changes and
    refused rows are set aside with a reason: ``set_aside_rows(spark, checkpoint, "stream" |
    "table" | "table_source")``.

    Args:
        stream: The events, streaming or batch.
        table_changes: The table's change stream: a Delta change data feed (``_change_type``,
            ``_commit_timestamp``, ``_commit_version``), Debezium envelopes (``op``, ``before``,
            ``after``, ``ts_ms``; JSON strings with
            ``table_format=ChangeFormat.debezium_json(key, row_schema)``) or a plain table (``op``
            in upsert/insert/update/delete/heartbeat and the change-time column ``table_time``).
        on: The event's columns that equal ``table_key`` (a foreign key is fine).
        stream_time: The events' event-time column.
        table_key: The table's primary key.
        table_time: The change-time column: required for a plain table; a Delta feed's is
            ``_commit_timestamp`` unless this names another timestamp column (a business time such
            as ``valid_from``).
        how: ``"left"`` (default) keeps events without a row (null-padded), ``"inner"`` drops them.
        mode: ``"as_of"`` (default) or ``"latest"`` (above).
        delay: How late a change or an event may arrive (the watermarks' delay).
        grace: Release a waiting event once the event watermark passes its time plus ``grace``.
        table_ttl: None (default) keeps every key; else a key not changed for longer than this,
            in table time, expires: as_of, an event at ``t`` finds no row when its key's version
            current at ``t`` changed before ``t - table_ttl``; latest, when the key's newest
            version changed before the table watermark minus ``table_ttl``. Such lookups count as
            ``expired_lookups`` while the key is held, and expired keys leave the state. A
            ``bootstrap`` then needs its change-time column (its rows age from it).
        bootstrap: A batch DataFrame of the table's rows (its key and value columns; a change-time
            column kept if present), loaded before the first batch; a row without a change time
            comes before every change of its key, and its change time is null in the output. An
            ``as_of`` streaming join (``end_of_run`` ``"flush"`` or ``"release"``) writes it to the
            checkpoint while its query starts (this call returns at once; a row that cannot be
            written stops the first micro-batch with
            [`InitialRowsError`][streamjoin.errors.InitialRowsError]); any other join before this
            call returns.
        table_format: The change vocabulary (a name or a
            [`ChangeFormat`][streamjoin.changes.format.ChangeFormat]); None: detected from the
            columns.
        table_sequence: A column that breaks ties of change time (a Delta feed's default:
            ``_commit_version``).
        store: As for [`interval_join`][streamjoin.spark.interval.interval_join].
        checkpoint: As for ``interval_join``.
        partitions: As for ``interval_join``.
        store_options: As for ``interval_join``.
        state_dir: As for ``interval_join``.
        max_partitions: As for ``interval_join``.
        stream_delay: Overrides ``delay`` for the event watermark.
        table_delay: Overrides ``delay`` for the table watermark.
        end_of_run: What an ``availableNow`` run does once it has read its data (``"flush"``,
            None the default: events the table watermark reached by then, e.g. through a
            heartbeat of the last micro-batch, come out in the same run; ``"hold"``: they wait
            for the next run; ``"release"``: then every waiting event is released and the inputs
            are closed; docs/design/end-of-input.md). A checkpoint that ran with ``"hold"``,
            the default before 0.3, keeps it. A ``latest`` join holds no event back, so it
            needs no such batch: unless ``"release"``, its query gets no flush source at all.
        heartbeats: An event whose every column but ``stream_time`` is null is a heartbeat of a
            quiet stream: it moves the event watermark like an event at that time and is never
            joined, output or set aside (counted as ``heartbeat_events``; the table's own
            heartbeats are change rows with op ``heartbeat``). Without it (default) such a row is
            an event with a null key.
        changes: The former name of ``table_format``; still works, with a ``DeprecationWarning``.
        initial_state: A new checkpoint's state, by side (``table``, ``events``): batch DataFrames of
            the rows [`read_join_state`][streamjoin.spark.state.read_join_state] reads from
            another checkpoint, maybe changed. Checked before the query starts, loaded by its
            first micro-batch, which emits nothing for them; ignored by a checkpoint that has run
            (docs/operations/upgrades.md, "Starting from state").
        initial_progress: With ``initial_state``, where each input had got to, as
            [`state_progress`][streamjoin.runtime.initial_state.state_progress] reads it (or a
            ``datetime``): the first watermark is then the old checkpoint's next one.
        layout: How each partition holds the table's versions: ``"runs"`` (the default) as
            sorted runs probed a micro-batch at a time, held in the Python worker's memory while
            they fit its budget (``STREAMJOIN_WORKER_MEMORY`` over the stores it may hold) and
            read by chunks of keys beyond it; ``"buckets"`` in key buckets read as a micro-batch
            touches them (docs/design/runtime.md, arranged state, steps 43-44). The results are
            the same. A checkpoint keeps the layout it started with: without ``layout``, a query
            takes its checkpoint's (a checkpoint started before ``"runs"`` became the default
            keeps ``"buckets"``); another is refused as a changed definition.

    Returns:
        Every event column, then the table's value columns (a name also in the events gets
        ``_table``).

    Raises:
        JoinDefinitionError: Before any query starts, when an argument is wrong.
    """
    options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions,
                          store_options=store_options, state_dir=state_dir,
                          max_partitions=max_partitions)
    key = list(column_names(table_key, "table_key"))
    check_columns(stream, "stream", [*column_names(on, "on (the event key columns)"), stream_time])
    check_time(stream, "stream_time", stream_time)
    fmt = change_format(table_changes, format_argument(table_format, changes, "table_format", "changes"), key,
                        table_time, table_sequence)
    if not fmt.vocabulary.needs_pre_stage:
        check_columns(table_changes, "table_changes", [fmt.time])
        check_time(table_changes, "table_time", fmt.time)
    if bootstrap is not None and (not isinstance(bootstrap, DataFrame) or bootstrap.isStreaming):
        raise JoinDefinitionError("bootstrap must be a batch DataFrame of the table's rows (spark.read...), not a stream")
    if bootstrap is not None and table_ttl is not None and fmt.time not in bootstrap.columns:
        raise JoinDefinitionError(
            f"with table_ttl, bootstrap rows age from their change time: add the snapshot's time as column "
            f"{fmt.time!r} (e.g. F.lit(snapshot_time).alias({fmt.time!r})); a row without one would be expired at once"
        )
    checkpoint = resolve_checkpoint(options.checkpoint, stream.isStreaming or table_changes.isStreaming,
                                    "stream_table_join")
    staged = {1: SOURCE_INPUT} if fmt.vocabulary.needs_pre_stage else {}
    table, fmt = plain_changes(table_changes, fmt, checkpoint)
    operator = EnrichmentJoin(
        arrow_schema(stream), arrow_schema(table), on, stream_time=stream_time, changes=fmt,
        mode=mode, how=how, delay=delay, grace=grace, table_ttl=table_ttl,
        stream_delay=stream_delay, table_delay=table_delay, heartbeats=heartbeats,
        layout=layout_for(checkpoint, layout),
    )
    check_watermark(stream, "stream", stream_time, operator.spec.stream_delay,
                    "stream_delay" if stream_delay is not None else "delay")
    if fmt.time in table_changes.columns:
        check_watermark(table_changes, "table_changes", fmt.time, operator.spec.table_delay,
                        "table_delay" if table_delay is not None else "delay")
    initial = None if bootstrap is None else [None, _bootstrap_changes(bootstrap, operator)]
    return run_plan(operator.plan, [stream, table], checkpoint=checkpoint,
                    partitions=options.partitions, state=options.state, key_groups=options.max_partitions,
                    initial=initial, end_of_run=end_of_run, pre_staged=staged,
                    initial_state=initial_state, initial_progress=initial_progress)


def _bootstrap_changes(bootstrap: DataFrame, operator: EnrichmentJoin) -> DataFrame:
    """The snapshot as upserts in the table input's schema (``EnrichmentJoin.bootstrap_changes``)."""
    spec = operator.spec
    rows = [n for n in spec.internal.names if not n.startswith("__sj_")]
    allowed = set(rows) | {spec.changes.time}
    check_columns(bootstrap, "bootstrap", list(spec.changes.key))
    unknown = [c for c in bootstrap.columns if c not in allowed]
    if unknown:
        raise JoinDefinitionError(
            f"bootstrap has columns {unknown} that the table's rows do not have; its rows have {rows} "
            f"(and the change time {spec.changes.time!r}); select those"
        )
    target = from_arrow_schema(spec.table, prefer_timestamp_ntz=True)
    present = {f.name: f.dataType for f in bootstrap.schema.fields}
    columns = []
    for f in target.fields:
        if f.name == spec.changes.op:
            value: Column | None = F.lit(spec.changes.snapshot_op()).cast(f.dataType)
        elif f.name not in present:
            value = F.lit(None).cast(f.dataType)
        elif present[f.name] == f.dataType:
            value = column(f.name)
        else:   # a time in another time type (a Parquet snapshot's TIMESTAMP for the changes' TIMESTAMP_NTZ)
            value = as_time(column(f.name), present[f.name], f.dataType)
        if value is None:
            break
        columns.append(value.alias(f.name))
    else:
        # the same rows as EnrichmentJoin.bootstrap_changes, in the JVM: no trip through Python
        # before the rows are routed (where they go through Python once, to the checkpoint)
        return bootstrap.select(columns)
    return bootstrap.mapInArrow(_AsChanges(operator, arrow_schema(bootstrap)), target)


class _AsChanges:
    """``EnrichmentJoin.bootstrap_changes`` over a partition of the snapshot (``schema``: its
    rows as the operator reads them, timestamps in UTC)."""

    def __init__(self, operator: EnrichmentJoin, schema: pa.Schema):
        self.operator, self.schema = operator, schema

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            # Spark labels a TIMESTAMP with the session's time zone: the same microseconds as in UTC
            rows = pa.Table.from_batches([batch]).cast(self.schema)
            yield from self.operator.bootstrap_changes(rows).to_batches()
