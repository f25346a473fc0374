"""The three joins over Arrow tables, run in this process by the engine-free operators.

``LocalJoins`` is what ``streamjoin.testing.assert_deterministic`` gives an in-process
pipeline as its ``joins`` argument: ``joins.interval_join``, ``joins.stream_table_join`` and
``joins.table_table_join`` take the arguments of ``streamjoin``'s functions of the same names
(the same names, defaults and order), but Arrow tables instead of DataFrames. As in Spark, a join
keeps its state in ``store`` (default ``arranged``) under ``state_dir``; ``partitions`` None is the
run's partition count (as Spark's is the session's shuffle partitions). Each call runs one
version of its join's plan through ``streamjoin.runtime.plan_runner.PlanRunner`` (changelogs and
checkpoints included) and returns that version's output, so a pipeline called once per
micro-batch is a streaming query, and called once with ``final=True`` is a batch query.
A micro-batch's processing time (what a join with ``idle_timeout`` reads; Spark's batch
timestamp) is the caller's: ``begin(version, processing_time=...)``; nothing here reads a clock.

Debezium change tables are turned into the plain form first (``routable``), as in Spark.
A join is identified by its ``checkpoint`` argument, or else by the order of the join calls in one
call of the pipeline (as Spark numbers a query's stateful operators).
"""

from __future__ import annotations

import datetime
import os
from dataclasses import replace
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.changes import ChangeFormat, VocabularyName, pre_stage, routable_format
from streamjoin.changes.registry import format_argument, resolve_format
from streamjoin.enrichment.operator import EnrichmentJoin, layout_for
from streamjoin.enrichment.spec import LayoutName, Mode, ModeName
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.kit.how import EnrichmentHow, How, IntervalHow, TableHow
from streamjoin.kit.watermark import WatermarkPolicy
from streamjoin.runtime.initial_state import check_given
from streamjoin.runtime.keygroups import check_count
from streamjoin.runtime.options import EndOfRun, JoinOptions, check_end_of_run
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.statestore.registry import DEFAULT_KIND
from streamjoin.table.bootstrap import bootstrap_changes
from streamjoin.table.operator import TableTableJoin

__all__ = ["LocalJoins", "change_format", "routable", "IDLE_TIMEOUT_NOTE"]

#: What the kit notes about a pipeline whose interval join has an ``idle_timeout``.
IDLE_TIMEOUT_NOTE = "interval_join(idle_timeout=...) is documented as dependent on processing time"
#: An as-of join over a view: the view's history holds one change per view row and micro-batch.
VIEW_AS_OF_NOTE = ("stream_table_join(mode=\"as_of\") over a view's change stream sees the view's history a "
                   "micro-batch at a time (a view row changed twice in one micro-batch has one change there), "
                   "documented as dependent on micro-batch boundaries")


def change_format(schema: pa.Schema, changes: str | ChangeFormat | None, key: Sequence[str],
                  time: str | None, sequence: str | None, argument: str = "table_changes",
                  changes_argument: str = "table_format", time_argument: str = "table_time") -> ChangeFormat:
    """The change vocabulary of a table with ``schema``, resolved as the Spark layer resolves it
    (:func:`streamjoin.changes.resolve_format`): ``changes`` if it is a ``ChangeFormat``, else the
    vocabulary it names or, when None, the one its columns show, with its default change time
    (Debezium's ``ts_us`` read as microseconds). ``argument``, ``changes_argument`` and
    ``time_argument`` name the join's arguments in errors."""
    return resolve_format(schema, changes, key, time=time, sequence=sequence, argument=argument,
                          changes_argument=changes_argument, time_argument=time_argument)


def routable(table: pa.Table, fmt: ChangeFormat) -> tuple[pa.Table, ChangeFormat]:
    """``table`` unchanged for vocabularies with top-level key columns (plain, Delta); Debezium
    turned into the plain form the operators route by (as the Spark layer does; rows it refuses,
    such as a null key, are left out here instead of being written to a set-aside output)."""
    if not fmt.vocabulary.needs_pre_stage:
        return table, fmt
    plain, _ = pre_stage(table, fmt)
    return plain, routable_format(fmt)


def _names(key: str | Sequence[str]) -> list[str]:
    return [key] if isinstance(key, str) else list(key)


class LocalJoins:
    """The joins of one in-process run (see module docstring).

    ``root`` holds every join's checkpoint, and its local stores unless it names a ``state_dir``;
    ``partitions`` (an int of at least 1) is the run's partition count, for joins that do not name their own; ``store`` is
    the run's store backend, which the kit passes to a pipeline as its ``store`` option (a join
    uses it when the pipeline passes it on: the joins' own default is ``arranged``, as in Spark).
    Set ``version``, ``final`` (and ``processing_time``) before each call of the
    pipeline (``begin``); ``restart`` loses
    every local store and starts new runners over the same checkpoints (a restarted query on
    another executor).
    """

    def __init__(self, root: str, *, partitions: int = 1, store: str = "memory") -> None:
        check_count(partitions, "partitions")
        self.root, self.partitions, self.store = root, partitions, store
        self.version, self.final = 0, False
        self.processing_time: int | None = None
        self.notes: list[str] = []
        self._runners: dict[str, Any] = {}
        self._calls = 0

    def begin(self, version: int, *, final: bool = False,
              processing_time: datetime.datetime | int | None = None) -> None:
        """Prepare for the pipeline's call on micro-batch ``version`` (``final``: the last one).
        ``processing_time``: the micro-batch's processing time (a datetime, naive ones in UTC, or
        microseconds since the epoch; None: none), as Spark's batch timestamp: give a re-executed
        micro-batch the same one."""
        self.version, self.final, self._calls = version, final, 0
        self.processing_time = _micros(processing_time)

    def restart(self) -> None:
        """Lose every join's local stores and continue with new runners (rebuilt from changelogs)."""
        for runner in self._runners.values():
            runner.lose_local_state()
        self._runners.clear()

    def _name(self, checkpoint: str | None) -> str:
        self._calls += 1
        return checkpoint if checkpoint is not None else f"join-{self._calls - 1}"

    def _checkpoint_dir(self, name: str) -> str:
        """Where the join named ``name`` keeps its checkpoint in this run."""
        return os.path.join(self.root, "checkpoints", _safe(name))

    def _runner(self, name: str, make: Any, options: JoinOptions) -> Any:
        if name not in self._runners:
            config = options.state
            if config.local_dir is None:
                config = replace(config, local_dir=os.path.join(self.root, "local", _safe(name)))
            self._runners[name] = make(self._checkpoint_dir(name), options.partitions or self.partitions, config,
                                       options.max_partitions)
        return self._runners[name]

    def _run(self, name: str, operator: Any, tables: Sequence[pa.Table], options: JoinOptions,
             initial: pa.Table | None = None, state: tuple[Mapping[str, pa.Table] | None, Any] = (None, None)
             ) -> pa.Table:
        runner = self._runner(name, lambda ck, n, cfg, groups: PlanRunner(operator.plan, ck, partitions=n, config=cfg,
                                                                          key_groups=groups), options)
        _start_from_state(runner, *state)
        if initial is not None and runner.wants_initial(1):
            runner.set_initial(1, initial)
        return runner.run(*tables, version=self.version, final=self.final, processing_time=self.processing_time)

    def interval_join(self, left: pa.Table, right: pa.Table, on: Any, *, left_time: str, right_time: str,
                      lower: Any, upper: Any, delay: Any, how: IntervalHow | How = "inner", store: str = DEFAULT_KIND,
                      checkpoint: str | None = None, partitions: int | None = None,
                      store_options: Mapping[str, Any] | None = None, state_dir: str | None = None,
                      max_partitions: int | None = None, left_delay: Any = None, right_delay: Any = None,
                      watermark_policy: WatermarkPolicy = "min", end_of_run: EndOfRun | None = None,
                      heartbeats: bool = False, idle_timeout: Any = None,
                      initial_state: Mapping[str, pa.Table] | None = None,
                      initial_progress: Mapping[str, Any] | None = None) -> pa.Table:
        """``streamjoin.interval_join`` over this micro-batch's Arrow tables. ``end_of_run`` is
        checked as in Spark; in process a run has no trigger to end (the kit's last call,
        ``final=True``, releases what a batch join releases), so it changes nothing here.
        ``idle_timeout`` reads the processing time given to ``begin`` (and is noted as
        dependent on it)."""
        check_end_of_run(end_of_run)
        options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions, store_options=store_options,
                              state_dir=state_dir, max_partitions=max_partitions)
        operator = IntervalJoin(left.schema, right.schema, on, left_time=left_time, right_time=right_time,
                                lower=lower, upper=upper, delay=delay, how=how, left_delay=left_delay,
                                right_delay=right_delay, watermark_policy=watermark_policy, heartbeats=heartbeats,
                                idle_timeout=idle_timeout)
        if operator.uses_processing_time:
            self._note(IDLE_TIMEOUT_NOTE)
        return self._run(self._name(checkpoint), operator, (left, right), options,
                         state=(initial_state, initial_progress))

    def stream_table_join(self, stream: pa.Table, table_changes: pa.Table, on: str | Sequence[str], *,
                          stream_time: str, table_key: str | Sequence[str], table_time: str | None = None,
                          how: EnrichmentHow | How = "left", mode: ModeName | Mode = "as_of", delay: Any,
                          grace: Any = None,
                          table_ttl: Any = None, bootstrap: pa.Table | None = None,
                          table_format: VocabularyName | ChangeFormat | None = None, table_sequence: str | None = None,
                          store: str = DEFAULT_KIND, checkpoint: str | None = None, partitions: int | None = None,
                          store_options: Mapping[str, Any] | None = None, state_dir: str | None = None,
                          max_partitions: int | None = None, stream_delay: Any = None,
                          table_delay: Any = None, end_of_run: EndOfRun | None = None,
                          heartbeats: bool = False, changes: VocabularyName | ChangeFormat | None = None,
                          initial_state: Mapping[str, pa.Table] | None = None,
                          initial_progress: Mapping[str, Any] | None = None,
                          layout: LayoutName | None = None) -> pa.Table:
        """``streamjoin.stream_table_join`` over this micro-batch's Arrow tables; ``bootstrap``
        (an Arrow table of the table's rows) is loaded before the join's first version.
        ``end_of_run``: as for ``interval_join``; ``changes``: the former name of ``table_format``."""
        check_end_of_run(end_of_run)
        options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions, store_options=store_options,
                              state_dir=state_dir, max_partitions=max_partitions)
        fmt = change_format(table_changes.schema, format_argument(table_format, changes, "table_format", "changes"),
                            _names(table_key), table_time, table_sequence)
        if bootstrap is not None and not isinstance(bootstrap, pa.Table):
            raise JoinDefinitionError("bootstrap must be an Arrow table of the table's rows in process, "
                                      f"not {type(bootstrap).__name__}")
        if bootstrap is not None and table_ttl is not None and fmt.time not in bootstrap.column_names:
            raise JoinDefinitionError(
                f"with table_ttl, bootstrap rows age from their change time: add the snapshot's time as column "
                f"{fmt.time!r}; a row without one would be expired at once")
        table_changes, fmt = routable(table_changes, fmt)
        name = self._name(checkpoint)
        operator = EnrichmentJoin(stream.schema, table_changes.schema, on, stream_time=stream_time, changes=fmt,
                                  mode=mode, how=how, delay=delay, grace=grace, table_ttl=table_ttl,
                                  stream_delay=stream_delay, table_delay=table_delay, heartbeats=heartbeats,
                                  layout=layout_for(self._checkpoint_dir(name), layout))
        if operator.spec.mode.value == "latest":
            self._note('stream_table_join(mode="latest") is documented as dependent on micro-batch boundaries')
        elif fmt.vocabulary.name == "streamjoin":
            self._note(VIEW_AS_OF_NOTE)
        initial = None if bootstrap is None else operator.bootstrap_changes(bootstrap)
        return self._run(name, operator, (stream, table_changes), options, initial,
                         (initial_state, initial_progress))

    def table_table_join(self, left_changes: pa.Table, right_changes: pa.Table, on: Any, *,
                         left_key: str | Sequence[str], right_key: str | Sequence[str], how: TableHow | How = "inner",
                         left_time: str | None = None, right_time: str | None = None,
                         left_format: VocabularyName | ChangeFormat | None = None,
                         right_format: VocabularyName | ChangeFormat | None = None,
                         left_sequence: str | None = None, right_sequence: str | None = None,
                         retention: Any = None, expire_rows: bool = False, left_delay: Any = None,
                         right_delay: Any = None, store: str = DEFAULT_KIND,
                         checkpoint: str | None = None, partitions: int | None = None,
                         store_options: Mapping[str, Any] | None = None, state_dir: str | None = None,
                         max_partitions: int | None = None, left_bootstrap: pa.Table | None = None,
                         right_bootstrap: pa.Table | None = None, fuse_key_stages: bool | None = None,
                         left_immutable_join_key: bool = False, right_immutable_join_key: bool = False,
                         initial_state: Mapping[str, pa.Table] | None = None,
                         initial_progress: Mapping[str, Any] | None = None) -> pa.Table:
        """``streamjoin.table_table_join`` over this micro-batch's Arrow tables: the view's changes.
        ``left_bootstrap`` / ``right_bootstrap`` (Arrow tables of the tables' rows) are loaded into
        the join's first version (``streamjoin.table.bootstrap``).

        The change stream itself depends on micro-batch boundaries (its ``_commit_version`` and
        ``_seq``, and changes that cancel within a batch); compare the view it gives
        (``streamjoin.testing.view_rows``)."""
        options = JoinOptions(store=store, checkpoint=checkpoint, partitions=partitions, store_options=store_options,
                              state_dir=state_dir, max_partitions=max_partitions)
        left, lf = routable(left_changes, change_format(left_changes.schema, left_format, _names(left_key), left_time,
                                                        left_sequence, "left_changes", "left_format", "left_time"))
        right, rf = routable(right_changes, change_format(right_changes.schema, right_format, _names(right_key),
                                                          right_time, right_sequence, "right_changes", "right_format",
                                                          "right_time"))
        if fuse_key_stages is None:   # as the checkpoint was started; a new one fused (as in Spark)
            fuse_key_stages = TableTableJoin.recorded_fusion(self._checkpoint_dir(self._name(checkpoint))) is not False
        operator = TableTableJoin(left.schema, right.schema, on, left_key=left_key, right_key=right_key, how=how,
                                  left_changes=lf, right_changes=rf, retention=retention, expire_rows=expire_rows,
                                  left_delay=left_delay, right_delay=right_delay, fuse_key_stages=fuse_key_stages,
                                  left_immutable_join_key=left_immutable_join_key,
                                  right_immutable_join_key=right_immutable_join_key,
                                  kept_key_stages=TableTableJoin.recorded_key_stages(
                                      self._checkpoint_dir(self._name(checkpoint))),
                                  rows_apart=TableTableJoin.recorded_rows_apart(
                                      self._checkpoint_dir(self._name(checkpoint))))
        runner = self._runner(self._name(checkpoint), lambda ck, n, cfg, groups: PlanRunner(
            operator.plan, ck, partitions=n, config=cfg, key_groups=groups), options)
        _start_from_state(runner, initial_state, initial_progress)
        for index, (rows, changes, fmt, argument) in enumerate(((left_bootstrap, left, lf, "left_bootstrap"),
                                                                (right_bootstrap, right, rf, "right_bootstrap"))):
            if rows is not None and runner.wants_initial(index):
                if not isinstance(rows, pa.Table):
                    raise JoinDefinitionError(f"{argument} must be an Arrow table of the table's rows in process, "
                                              f"not {type(rows).__name__}")
                runner.set_initial(index, bootstrap_changes(rows, changes.schema, fmt, argument, expire_rows))
        return runner.run(left, right, version=self.version, final=self.final, processing_time=self.processing_time)

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def _safe(name: str) -> str:
    """A join's name as one folder name."""
    return name.replace("/", "_").replace(":", "_")


def _micros(value: datetime.datetime | int | None) -> int | None:
    """A processing time as microseconds since the epoch (a naive datetime is UTC)."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, datetime.datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)
        return (aware - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)) // datetime.timedelta(microseconds=1)
    raise TypeError(f"processing_time must be a datetime or microseconds since the epoch (int), not {value!r}")


def _start_from_state(runner: PlanRunner, rows: Mapping[str, pa.Table] | None, progress: Mapping[str, Any] | None) -> None:
    """``initial_state`` / ``initial_progress`` as the Spark joins take them (Arrow tables of
    ``read_state``'s rows by side; the progress as ``state_progress`` gives it), given to a join
    that has not started yet."""
    check_given(rows, progress)
    if (rows or progress) and runner.wants_initial_state():
        runner.set_initial_state(dict(rows or {}), progress)
