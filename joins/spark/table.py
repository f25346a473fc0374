"""``table_table_join``: a materialized view of two tables' change streams, in PySpark (docs/design/semantics.md "Table-table join")."""

from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

from pyspark.sql import DataFrame

from streamjoin.changes import ChangeFormat, VocabularyName
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.how import How, TableHow
from streamjoin.kit.on import On, column_names, parse_on
from streamjoin.kit.times import Duration
from streamjoin.runtime.options import JoinOptions
from streamjoin.spark.changes import change_format, plain_changes
from streamjoin.spark.plan import run_plan
from streamjoin.spark.runtime import arrow_schema, resolve_checkpoint
from streamjoin.spark.table_bootstrap import bootstrap_changes
from streamjoin.statestore.registry import DEFAULT_KIND
from streamjoin.table.fused import fused_keys
from streamjoin.table.operator import JOIN, LEFT_KEYS, RIGHT_KEYS, TableTableJoin

__all__ = ["table_table_join"]


def table_table_join(
    left_changes: DataFrame,
    right_changes: DataFrame,
    on: On,
    *,
    left_key: str | Sequence[str],
    right_key: str | Sequence[str],
    how: TableHow | How = "inner",
    left_time: str | None = None,
    right_time: str | None = None,
    left_format: VocabularyName | ChangeFormat | None = None,
    right_format: VocabularyName | ChangeFormat | None = None,
    left_sequence: str | None = None,
    right_sequence: str | None = None,
    retention: Duration | None = None,
    expire_rows: bool = False,
    left_delay: Duration | None = None,
    right_delay: Duration | None = None,
    store: str = DEFAULT_KIND,
    checkpoint: str | None = None,
    partitions: int | None = None,
    store_options: Mapping[str, Any] | None = None,
    state_dir: str | None = None,
    max_partitions: int | None = None,
    left_bootstrap: DataFrame | None = None,
    right_bootstrap: DataFrame | None = None,
    fuse_key_stages: bool | None = None,
    left_immutable_join_key: bool = False,
    right_immutable_join_key: bool = False,
    initial_state: Mapping[str, DataFrame] | None = None,
    initial_progress: Mapping[str, Any] | None = None,
) -> DataFrame:
    """The change stream of the view ``left JOIN right ON on``, kept up to date as both change.

    Both inputs are change streams as for
    [`stream_table_join`][streamjoin.spark.enrichment.stream_table_join]. Changes to one row apply
    in change-time (then sequence) order; an older or duplicate change is stale and ignored, and a
    delete of an unknown row is harmless; both are counted in the metrics. A row whose join key
    changes (a post moved to another author) is retracted from its old key by a first stage
    partitioned by primary key; so the join runs up to three stages, each with its own state and
    changelogs under ``<checkpoint>/left_keys``, ``right_keys`` and ``join`` (``join_metrics`` and
    ``set_aside_rows`` take those paths). A side whose rows never move to another join key needs
    no first stage (``fuse_key_stages``, the default for a new checkpoint): its changes go
    straight to the join stage, whose inputs are then ``left_changes`` / ``right_changes`` for
    such a side. That is a side whose join-key columns are among its primary-key columns (a
    foreign-key join's key side: a foreign-key join runs ``left_keys`` and ``join``), or one
    declared with ``left_immutable_join_key`` / ``right_immutable_join_key`` (an append-only
    event table joined with a dimension runs one stage, its state in the checkpoint itself).

    Args:
        left_changes: The left table's change stream (Delta change data feed, Debezium
            envelopes, plain with an ``op`` column and the change-time column ``left_time``, or
            another ``table_table_join``'s output, a view over several tables).
        right_changes: The right table's change stream.
        on: A column name, a list of names on both sides, or a pair (left names, right names):
            primary key to primary key, foreign key to primary key, or many to many.
        left_key: The left table's primary key.
        right_key: The right table's primary key.
        how: ``inner``, ``left`` or ``full`` (or a Spark spelling: ``left_outer``, ``outer``, ...).
        left_time: The left change-time column (required for plain changes).
        right_time: The right change-time column.
        left_format: The left change vocabulary (a name or a
            [`ChangeFormat`][streamjoin.changes.format.ChangeFormat]); None: detected.
        right_format: The right change vocabulary.
        left_sequence: A left column that breaks ties of change time.
        right_sequence: A right column that breaks ties of change time.
        retention: None (default) keeps every key forever; else (a timedelta or a Spark interval
            string such as ``"7 days"``) a deleted row's tombstone is dropped once it is older
            than its table's newest change time minus ``retention`` (the horizon), and a change
            older than the horizon when it arrives is set aside as late (counted as
            ``late_changes``).
        expire_rows: Also drop rows whose last change is older than the horizon: the view
            retracts their joined rows.
        left_delay: The left table's own horizon distance instead of ``retention`` (how late its
            changes may arrive; this join holds nothing back for lateness, so a table's delay
            only sets what is late and when its keys expire).
        right_delay: The right table's own horizon distance.
        store: As for [`interval_join`][streamjoin.spark.interval.interval_join].
        checkpoint: As for ``interval_join``.
        partitions: As for ``interval_join``.
        store_options: As for ``interval_join``.
        state_dir: As for ``interval_join``.
        max_partitions: As for ``interval_join``.
        left_bootstrap: A batch DataFrame of the left table's rows before its change stream's
            first change (its key and row columns; a change-time column kept if present, and
            needed with ``expire_rows``), loaded into the join's first version; a row without a
            change time comes before every change of its key (``streamjoin.table.bootstrap``).
        right_bootstrap: The same for the right table.
        fuse_key_stages: Run the first stage of a side whose primary key is its join key (the
            same columns, in order) inside the join stage: one stage and one exchange fewer for
            that side, the same view changes. None (the default): as the checkpoint was started
            (a checkpoint of streamjoin before this option keeps its three stages), and True for a
            new one. A checkpoint keeps the stages it was started with: the other choice is refused.
        left_immutable_join_key: Promise that a left row never moves to another join key (an
            append-only event table, or rows whose join key is fixed when they are inserted) and
            that the left deletes carry the row's join key; with ``fuse_key_stages`` the left side
            then needs no first stage. Like a ``NOT ENFORCED`` constraint in SQL engines it is
            trusted, not checked across partitions: a change that moves a held row and lands in
            the partition that holds it is set aside with its reason (counted as
            ``moved_join_keys``); one that lands elsewhere adds a second row. A checkpoint keeps
            the stages it was started with, so the declaration cannot change on restart.
        right_immutable_join_key: The same for the right side.
        initial_state: A new checkpoint's state, by side (``left``, ``right``, ``left_keys``, ``right_keys``): batch DataFrames of
            the rows [`read_join_state`][streamjoin.spark.state.read_join_state] reads from
            another checkpoint, maybe changed. Checked before the query starts, loaded by its
            first micro-batch, which emits nothing for them; ignored by a checkpoint that has run
            (docs/operations/upgrades.md, "Starting from state").
        initial_progress: With ``initial_state``, where each input had got to, as
            [`state_progress`][streamjoin.runtime.initial_state.state_progress] reads it (or a
            ``datetime``): the first watermark is then the old checkpoint's next one.

    Returns:
        The view's changes in the Delta change data feed vocabulary: the left row's columns, the
        right row's (a name on both sides gets ``_left`` / ``_right``), ``_change_type``
        (``insert``, ``update_preimage``, ``update_postimage``, ``delete``), ``_commit_version``
        (the micro-batch id), ``_seq`` and ``_change_timestamp`` (the time of the input change
        that caused the view change). It is a change stream in the ``streamjoin`` vocabulary,
        which the next ``table_table_join`` (either side, its key the view key or part of it)
        or ``stream_table_join`` (the table side) reads as it comes; applied in (``_commit_version``, ``_seq``) order to an
        empty table, they give after every micro-batch the join of the two tables as they stand
        ([`MaterializedView`][streamjoin.view.MaterializedView] does it). Outer joins insert a
        null-padded row while a row has no match and retract it when its first match appears.

    Raises:
        JoinDefinitionError: Before any query starts, when an argument is wrong.
    """
    options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions,
                          store_options=store_options, state_dir=state_dir,
                          max_partitions=max_partitions)
    streaming = left_changes.isStreaming or right_changes.isStreaming
    checkpoint = resolve_checkpoint(options.checkpoint, streaming, "table_table_join")
    left_key = list(column_names(left_key, "left_key"))
    right_key = list(column_names(right_key, "right_key"))
    left_fmt = change_format(left_changes, left_format, left_key, left_time, left_sequence, "left_changes",
                             "left_format", "left_time")
    right_fmt = change_format(right_changes, right_format, right_key, right_time, right_sequence, "right_changes",
                              "right_format", "right_time")
    if fuse_key_stages is None:
        fuse_key_stages = TableTableJoin.recorded_fusion(checkpoint) is not False
    elif not isinstance(fuse_key_stages, bool):
        raise JoinDefinitionError(f"fuse_key_stages must be True, False or None (as the checkpoint was started), "
                                  f"not {fuse_key_stages!r}")
    # change rows refused before routing are set aside under the stage reading that side
    kept = TableTableJoin.recorded_key_stages(checkpoint)
    left_on, right_on = parse_on(on)
    fused = {side for side, key, side_on, fmt, declared in (
                 ("left", left_key, left_on, left_fmt, left_immutable_join_key),
                 ("right", right_key, right_on, right_fmt, right_immutable_join_key))
             if fuse_key_stages and fused_keys(key, side_on, fmt, declared, side in kept) is not None}
    readers = stage_readers(fused)
    sources = {side: (f"{checkpoint.rstrip('/')}/{stage}" if stage else checkpoint, name)
               for side, (stage, name) in readers.items()}
    staged = {i: sources[side][1] for i, (side, fmt) in enumerate((("left", left_fmt), ("right", right_fmt)))
              if fmt.vocabulary.needs_pre_stage}
    left, left_fmt = plain_changes(left_changes, left_fmt, *sources["left"])
    right, right_fmt = plain_changes(right_changes, right_fmt, *sources["right"])
    join = TableTableJoin(
        arrow_schema(left), arrow_schema(right), on, left_key=left_key, right_key=right_key, how=how,
        left_changes=left_fmt, right_changes=right_fmt, retention=retention, expire_rows=expire_rows,
        left_delay=left_delay, right_delay=right_delay, fuse_key_stages=fuse_key_stages,
        left_immutable_join_key=left_immutable_join_key, right_immutable_join_key=right_immutable_join_key,
        kept_key_stages=kept, rows_apart=TableTableJoin.recorded_rows_apart(checkpoint),
    )
    initial = [None if rows is None else bootstrap_changes(rows, df, fmt, argument, expire_rows)
               for rows, df, fmt, argument in ((left_bootstrap, left, left_fmt, "left_bootstrap"),
                                               (right_bootstrap, right, right_fmt, "right_bootstrap"))]
    return run_plan(join.plan, [left, right], checkpoint=checkpoint, partitions=options.partitions,
                    state=options.state, key_groups=options.max_partitions, initial=initial, pre_staged=staged,
                    end_of_run="hold", initial_state=initial_state, initial_progress=initial_progress)   # it holds nothing for a watermark (docs/design/end-of-input.md)


def stage_readers(fused: Collection[str]) -> dict[str, tuple[str, str]]:
    """Per side, the stage reading its changes and the set-aside input its refused change rows go
    to: ``(LEFT_KEYS, "changes_source")``, or for a side fused into the join stage (``fused``:
    :func:`streamjoin.table.fused.fused_keys` says which) the join stage (``JOIN``; "" when both
    sides are fused: the join is that one stage) and ``"<side>_changes_source"``."""
    join = "" if len(fused) == 2 else JOIN
    return {side: (join, f"{side}_changes_source") if side in fused else (own, "changes_source")
            for side, own in (("left", LEFT_KEYS), ("right", RIGHT_KEYS))}
