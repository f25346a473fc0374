"""One task: one partition of an operator running one version, the engine-free half of the runtime.

:func:`run_task` is what a Spark task does (the Spark layer only gathers the rows and hands back
the output), and what the in-process runner does, so both execute the same code, in four phases,
each entering the checkpoint's modules once:

1. **read** (:func:`read_phase`): everything the task needs from the checkpoint: the query check
   (a checkpoint of another query, or for a batch task of any streaming query, is refused), the
   partitioning epoch and, in a new epoch's first version, the partition's changelog rebuilt from
   the old epoch (:func:`streamjoin.runtime.rescale.prepare_partition`), the global event-time
   progress before version ``v`` (one listing of the previous version's commit records; with it the
   processing-time progress, :func:`processing_after`; none of them while the partition's changelog
   holds the delta of ``v-1`` is lost records, :class:`CheckpointDamagedError`), the
   version to open the store at (``v-1``, or none for a partition that has committed nothing: only
   when the checkpoint shows nothing committed before ``v``, else :class:`CheckpointDamagedError`),
   and the initial rows of a partition's first version;
2. **open** (:func:`open_phase`): the partition's local store at that version: reused, rolled
   forward or back, or rebuilt from the changelog (:mod:`streamjoin.changelog.store`);
3. **step**: the operator on the rows;
4. **commit** (:func:`commit_phase`): version ``v``'s changelog delta first, then the local store
   with its version marker; a snapshot every ``snapshot_every`` versions; then the rows set aside,
   this partition's commit record (progress and metrics), and pruning of old commit records.

A task that fails anywhere before the changelog delta leaves the state at ``v-1``; one that fails
after it left version ``v`` committed, and executing ``v`` again first returns the store to ``v-1``.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changelog import Changelog, open_logged_store, owner_tag, release_logged_store, snapshot_from_store
from streamjoin.changelog.logging_store import ChangeloggingStore, OpenHow, OpenReport
from streamjoin.errors import CheckpointDamagedError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.commits import Progress
from streamjoin.runtime.checkpoint.initial import state_name, summary_progress
from streamjoin.runtime.initial_state import split_sides, step_on_loaded
from streamjoin.runtime.operator import REASON_COLUMN, Operator, StepInput, StepResult
from streamjoin.runtime.options import StateConfig, default_local_dir
from streamjoin.runtime.rescale import Epoch, changelog_uri, epoch_dir, prepare_partition
from streamjoin.statestore.base import Store

__all__ = ["TaskInfo", "TaskStart", "SteppedTask", "Arrived", "run_task", "step_task", "read_phase", "open_phase",
           "commit_phase", "progress_after", "processing_after", "local_store_path", "store_owner"]


@dataclass(frozen=True)
class TaskInfo:
    """Which version and partition a task runs, and in which query. ``processing_time``: the
    version's processing time (µs) if the task knows it (in Spark, the micro-batch's timestamp,
    carried by its rows; in process, the caller's), the same for every execution of the version."""

    version: int
    partition: int
    partitions: int
    attempt: int = 0
    final: bool = False
    query_id: str | None = None
    processing_time: int | None = None


@dataclass(frozen=True)
class Arrived:
    """A task's rows as the callable ``rows`` of :func:`run_task` may hand them over: with the
    version's processing time they carried (in Spark, the micro-batch's timestamp;
    :attr:`TaskInfo.processing_time`), known only once they have arrived."""

    rows: tuple[pa.Table, ...]
    processing_time: int | None = None


@dataclass(frozen=True)
class TaskStart:
    """What the read phase found: the partitioning ``epoch``, the global progress before the
    version (``known``) and the watermark inputs the step sees (``max_times``: the same, a final
    task's too: a batch run's has none, and a streaming run's closing version keeps the progress
    before it, so the table join's horizon and what it makes due hold there), the partition's
    changelog ``log`` and the version to open its store at (``target``; None: empty), and the task's ``rows`` with each input's initial rows before them
    (``initial``: how many); ``processing``: the processing-time progress before the version."""

    epoch: Epoch
    known: tuple[int | None, ...]
    max_times: tuple[int | None, ...]
    log: Changelog
    target: int | None
    rows: tuple[pa.Table, ...]
    initial: tuple[int, ...]
    processing: Progress | None = None
    #: the state rows the partition's first version starts from, by side
    #: (:mod:`streamjoin.runtime.initial_state`); None: it starts from its changelog, or empty
    state_rows: Mapping[str, pa.Table] | None = None
    #: their summary over all partitions (:meth:`Operator.state_summary`)
    state_summary: Mapping[str, int] | None = None


@dataclass(frozen=True)
class OpenStore:
    """The open phase's store, how it was opened, and how long that took."""

    store: ChangeloggingStore
    opened: OpenReport
    seconds: float


def run_task(
    operator: Operator,
    checkpoint: Checkpoint,
    config: StateConfig,
    task: TaskInfo,
    rows: tuple[pa.Table, ...] | Callable[[], tuple[pa.Table, ...] | Arrived],
    *,
    wrap_store: Callable[[Store], Store] | None = None,
) -> tuple[pa.Table, dict[str, Any]]:
    """Run ``operator`` on one partition's rows of one version; return its output and metrics
    (:func:`step_task`, then its commit; ``wrap_store`` as there)."""
    stepped = step_task(operator, checkpoint, config, task, rows, wrap_store=wrap_store)
    return stepped.output, stepped.commit()


@dataclass
class SteppedTask:
    """A task's version stepped but not committed: its output (:attr:`output`), and the commit phase.

    A caller may hand the output on before it calls :meth:`commit` (a Spark task sends it to the
    JVM, which converts it while the commit writes its files), as long as nothing downstream
    keeps the output of a task that did not finish: in Spark a task's output counts only when
    the task succeeds, and the task ends only after :meth:`commit`. :meth:`abandon` (safe to call
    after a commit too) closes the store of a task that will not commit."""

    operator: Operator
    checkpoint: Checkpoint
    config: StateConfig
    task: TaskInfo
    start: TaskStart
    opened: OpenStore
    result: StepResult
    done: bool = False
    #: the store the step used when ``wrap_store`` wrapped it (None: ``opened.store``); the commit writes through it
    stepped_on: Store | None = None

    @property
    def output(self) -> pa.Table:
        return self.result.output

    def commit(self, extra_metrics: Mapping[str, int] | None = None) -> dict[str, Any]:
        """Commit the version (:func:`commit_phase`; ``extra_metrics`` as there); returns the
        task's metrics."""
        self.done = True
        metrics = commit_phase(self.operator, self.checkpoint, self.config, self.task, self.start, self.opened,
                               self.result, writer=self.stepped_on, extra_metrics=extra_metrics)
        _maybe_fail_once(self.config, self.task, "after-commit")
        return metrics

    def abandon(self) -> None:
        """Close the store unless the version was committed (or a commit was tried): the version
        stays uncommitted, and executing it again starts from ``v-1``."""
        if not self.done:
            self.done = True
            self.opened.store.close()


def step_task(
    operator: Operator,
    checkpoint: Checkpoint,
    config: StateConfig,
    task: TaskInfo,
    rows: tuple[pa.Table, ...] | Callable[[], tuple[pa.Table, ...] | Arrived],
    *,
    wrap_store: Callable[[Store], Store] | None = None,
) -> SteppedTask:
    """The read, open and step phases of a task (see module); the commit is the result's.

    ``rows`` may be a callable that returns them (or an :class:`Arrived`, which also sets the
    task's processing time): the rows are taken after the read and open phases, so a caller
    whose rows are still arriving (a Spark task's input, drained by another thread) has the
    checkpoint read and the store opened meanwhile, not after.

    ``wrap_store`` (benchmark instrumentation; None, the default, wraps nothing): called with the
    opened (changelogging) store, it returns the store the operator's step receives and the
    commit writes the step's changes through, e.g. :meth:`streamjoin.statestore.timed.StoreTimer.wrap`
    to time the operator's reads and that write. Opening, snapshots, the store's stats and its
    release still use the opened store itself."""
    start = read_phase(operator, checkpoint, config, task, tuple(s.schema.empty_table() for s in operator.inputs))
    opened = open_phase(operator, checkpoint, config, task, start)
    try:
        got = rows() if callable(rows) else rows
        if isinstance(got, Arrived):
            task, got = replace(task, processing_time=got.processing_time), got.rows
        start = replace(start, rows=_after(start.rows, got))
        processing = start.processing or Progress(start.known)
        state = opened.store if wrap_store is None else wrap_store(opened.store)
        batch = StepInput(task.version, task.partition, start.rows, start.max_times, task.final, processing.now,
                          processing.advanced_at)
        if start.state_rows is not None:   # the partition's first version, started from state rows
            result = step_on_loaded(operator, start.state_rows, start.state_summary or {}, batch)
        else:
            result = operator.step(state, batch)
        _maybe_fail_once(config, task, "before-commit")
    except BaseException:
        opened.store.close()
        raise
    return SteppedTask(operator, checkpoint, config, task, start, opened, result,
                       stepped_on=None if wrap_store is None else state)


def read_phase(operator: Operator, checkpoint: Checkpoint, config: StateConfig, task: TaskInfo,
               rows: tuple[pa.Table, ...]) -> TaskStart:
    """Everything the task reads from the checkpoint, in one place (see module, phase 1):
    ``streamjoin.json`` is read once, the commit records listed once (twice after a gap)."""
    root = checkpoint.binding.root()
    checkpoint.binding.check_query(task.query_id, root)
    n_inputs = len(operator.inputs)
    epoch = prepare_partition(operator, checkpoint, config.store, dict(config.store_options),
                              config.local_dir or default_local_dir(), task.version, task.partition,
                              task.partitions, config.retain_versions, root=root)   # rebuilt after a rescale
    log = Changelog(changelog_uri(checkpoint, epoch, task.partition), retain_versions=config.retain_versions,
                    cache_listing=True)
    before = checkpoint.commits.progress_before(task.version, n_inputs, _committed(log, task.version - 1))
    target = _target(checkpoint, log, task)
    # a partition's first version of a join started from state rows: their summary, and the
    # progress it gives (the versions after read it from the commit records)
    summary = checkpoint.initial.summary() if config.initial and target is None else {}
    base = summary_progress(summary, tuple(spec.name for spec in operator.inputs))
    if base is not None and all(t is None for t in before.max_times):
        before = replace(before, max_times=base)
    known = before.max_times
    initial = (0,) * n_inputs
    state_rows = None
    if config.initial or target is None:   # only a first version, or its re-execution, takes them
        found = _initial_rows(operator, checkpoint, task, first=target is None)
        rows, initial = _with_initial(rows, found[:n_inputs])
        if config.initial and target is None and any(t is not None for t in found[n_inputs:]):
            state_rows = split_sides(found[n_inputs:], tuple(operator.state_views))
    return TaskStart(epoch, known, known, log, target, rows, initial, before, state_rows, summary)


def open_phase(operator: Operator, checkpoint: Checkpoint, config: StateConfig, task: TaskInfo,
               start: TaskStart) -> OpenStore:
    """The partition's local store at ``start.target`` (phase 2), owned by this checkpoint, query,
    operator, epoch and partition (:func:`store_owner`)."""
    began = time.perf_counter()
    store, opened = open_logged_store(
        config.store, local_store_path(config, checkpoint, task.partition, epoch_dir(start.epoch)), start.log,
        start.target, warm=_hand_over(config, task), park=_keep_warm(config, task),
        owner=store_owner(operator, checkpoint, task, start.epoch.number, config.checkpoint_id),
        **dict(config.store_options),
    )
    return OpenStore(store, opened, time.perf_counter() - began)


def commit_phase(operator: Operator, checkpoint: Checkpoint, config: StateConfig, task: TaskInfo,
                 start: TaskStart, opened: OpenStore, result: StepResult, *,
                 writer: Store | None = None, extra_metrics: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Commit version ``task.version`` (phase 4): the changelog delta and the local store with its
    version marker, a snapshot when due, the store released (kept open for the partition's next
    task in this process); then the rows set aside (only when there are some), the commit record
    (progress and metrics in one durable file) and, by partition 0, pruning of the commit records
    older than the changelog's retention. Returns the task's metrics. ``writer``: the wrapper of
    ``opened.store`` the step's changes are written through (``wrap_store`` of :func:`step_task`;
    None: the opened store). ``extra_metrics``: counts the engine's layer adds to the record (in
    Spark, the rows set aside before routing, :mod:`streamjoin.spark.changes`)."""
    store = opened.store
    try:
        # a partition's first version snapshots, except version 0: the empty origin starts the log,
        # so its delta restores it as it is, and a bootstrap loaded there is not written twice
        first = start.target is None and task.version > 0
        snapshot = first or task.version - _last_snapshot(start.log, task.version) >= config.snapshot_every
        if snapshot:   # (the store may leave a merge due at this write to the snapshot it can take as its base)
            store.snapshot_follows()
        result.write_to(store if writer is None else writer, task.version)
        if snapshot:
            snapshot_from_store(start.log, store, task.version)
        stats = store.stats()
    except BaseException:
        store.close()
        raise
    release_logged_store(store)
    metrics = _metrics(operator, task, start.rows, result, opened, stats)
    for spec, count in zip(operator.inputs, start.initial):
        if count:
            metrics[f"initial_rows_{spec.name}"] = count
    metrics.update(extra_metrics or {})
    progress = progress_after(operator, start.known, start.rows)
    for spec, value in zip(operator.inputs, progress):
        if value is not None:
            metrics[f"max_time_{spec.name}"] = value
    for spec, aside in zip(operator.inputs, result.set_aside):
        if aside.num_rows:
            checkpoint.set_aside.write(spec.name, task.version, task.partition, aside)
    processing = processing_after(start.processing or Progress(start.known), progress, start.rows,
                                  task.processing_time if operator.uses_processing_time else None)
    checkpoint.commits.write(task.version, task.partition, task.partitions, progress, metrics, processing)
    if task.partition == 0:
        checkpoint.commits.prune(keep_from=task.version - config.retain_versions + 1)
    return metrics


def local_store_path(config: StateConfig, checkpoint: Checkpoint, partition: int, epoch: str = "") -> str:
    """The partition's local store directory, unique to the checkpoint and the partitioning epoch
    (``epoch``: :func:`streamjoin.runtime.rescale.epoch_dir`) it belongs to."""
    digest = hashlib.sha256(checkpoint.uri.encode()).hexdigest()[:16]
    return os.path.join(config.local_dir or default_local_dir(), digest, f"{epoch}p={partition}")


def store_owner(operator: Operator, checkpoint: Checkpoint, task: TaskInfo, epoch: int,
                checkpoint_id: str | None = None) -> bytes:
    """The owner tag of the partition's local store: the store proves it holds this checkpoint's
    (``checkpoint_id``: the one made at this location, if it has an id; and query's) state of this
    operator, partitioning epoch and partition before it is reused, and is rebuilt from the
    changelog otherwise."""
    parts: tuple[object, ...] = (checkpoint.uri, task.query_id, operator.kind, epoch, task.partition)
    return owner_tag(*parts) if checkpoint_id is None else owner_tag(*parts, checkpoint_id)


def _hand_over(config: StateConfig, task: TaskInfo) -> bool:
    """Whether the task takes its store over from the task before it, in this process or parked
    in another (:mod:`streamjoin.statestore.warm`): every task of a streaming query, its final
    one too (``end_of_run="release"``'s closing version follows versions that parked theirs)."""
    return config.keep_warm and task.query_id is not None


def _keep_warm(config: StateConfig, task: TaskInfo) -> bool:
    """Whether the task's store stays open after it: for a streaming query's tasks (a query id,
    not final). A batch run's tasks run once, and runs without a query (in-process runners,
    tests) own their directories and may remove them as soon as they return."""
    return config.keep_warm and task.query_id is not None and not task.final


def _target(checkpoint: Checkpoint, log: Changelog, task: TaskInfo) -> int | None:
    """The version to open the store at: ``v-1``, or None for a partition whose log has nothing
    before ``v`` (a new join, possibly in a query whose batch ids began earlier, or its first
    version executed again). A missing ``v-1`` is a gap: the changelog raises, naming it, rather
    than this task silently starting from an older state. An empty log while the checkpoint
    shows earlier versions raises :class:`CheckpointDamagedError`; so does a log whose files
    before ``v`` restore nothing."""
    listing = log.listing()
    restorable = listing.restorable()
    if any(v < task.version for v in restorable):
        if restorable[-1] < task.version - 1:
            _check_newest_delta(checkpoint, log, task, restorable[-1])
        return task.version - 1
    if any(f.version < task.version for f in listing.files()):
        raise listing.unreachable(task.version - 1)
    if listing.empty:
        evidence = checkpoint.commits.committed_before(task.version)
        if evidence:
            raise CheckpointDamagedError(
                f"partition {task.partition}'s changelog {log.uri} is missing or empty, but checkpoint "
                f"{checkpoint.uri} shows the join committed versions before {task.version} "
                f"({'; '.join(evidence)}). Starting this partition empty would lose its state: "
                "restore the changelog directory from a copy of the checkpoint, or start the join "
                "from a new checkpoint location", path=log.uri)
    return None


def _check_newest_delta(checkpoint: Checkpoint, log: Changelog, task: TaskInfo, newest: int) -> None:
    """Raise :class:`CheckpointDamagedError` naming the delta of ``task.version - 1`` when the
    partition's changelog, restorable only up to ``newest``, lacks it although the partition's
    commit record shows that version committed (a record is written after its delta): the delta
    was lost, and the changelog's own error could only say to restore an older version."""
    wanted = task.version - 1
    if not any(r.partition == task.partition and r.partitions == task.partitions
               for r in checkpoint.commits.records(wanted)):
        return
    where = checkpoint.files.location(f"commits/v={wanted}")
    raise CheckpointDamagedError(
        f"partition {task.partition}'s changelog {log.uri} has no delta of version {wanted} (it restores "
        f"up to version {newest}), but its commit record of version {wanted} ({where}) shows the version "
        "committed: the delta was lost. Restore the changelog directory from a copy of the checkpoint "
        "(`streamjoin checkpoint verify` lists what is missing), or start the join from a new checkpoint "
        "location", path=log.uri)


def _committed(log: Changelog, version: int) -> str | None:
    """The partition's delta of ``version`` (its URI), evidence that the version was committed;
    None when the log has none (a new join, or a partition rebuilt by a rescale from a snapshot)."""
    delta = log.listing().deltas.get(version)
    return None if delta is None else f"partition changelog file {log.uri}/{delta.name}"


def _initial_rows(operator: Operator, checkpoint: Checkpoint, task: TaskInfo,
                  first: bool) -> tuple[pa.Table | None, ...]:
    """The initial rows (``cp.initial``) of each input, then the state rows of each side of
    :attr:`Operator.state_views`, for this task, if its version is the partition's first: the
    one that found no earlier state, recorded before it commits so that executing it again (even
    after a base snapshot was written) reads them too."""
    names = tuple(spec.name for spec in operator.inputs) + tuple(state_name(side) for side in operator.state_views)
    used = checkpoint.initial.used(task.partition)
    if (used is None and not first) or (used is not None and used != task.version):
        return (None,) * len(names)
    tables = checkpoint.initial.read_all(names, task.partition)
    if used is None and any(t is not None for t in tables):
        checkpoint.initial.mark_used(task.partition, task.version)
    return tables


def _with_initial(rows: tuple[pa.Table, ...], initial: tuple[pa.Table | None, ...]) -> tuple[tuple[pa.Table, ...], tuple[int, ...]]:
    """Each input's rows preceded by its initial rows; and how many initial rows each had."""
    merged, counts = [], []
    for table, extra in zip(rows, initial):
        if extra is None or extra.num_rows == 0:
            merged.append(table)
            counts.append(0)
        else:
            merged.append(pa.concat_tables([extra.cast(table.schema), table]))
            counts.append(extra.num_rows)
    return tuple(merged), tuple(counts)


def _after(first: tuple[pa.Table, ...], rows: tuple[pa.Table, ...]) -> tuple[pa.Table, ...]:
    """Each input's ``rows`` after its ``first`` rows (the initial rows the read phase found)."""
    return tuple(table if not head.num_rows else pa.concat_tables([head.cast(table.schema), table])
                 for head, table in zip(first, rows))


def _maybe_fail_once(config: StateConfig, task: TaskInfo, point: str) -> None:
    if config.fail_once is None:
        return
    path = f"{config.fail_once}.{point}.v{task.version}.p{task.partition}"
    if os.path.exists(path):
        os.remove(path)
        raise RuntimeError(f"streamjoin test hook: injected failure ({path})")


def progress_after(operator: Operator, known: tuple[int | None, ...],
                   rows: tuple[pa.Table, ...]) -> tuple[int | None, ...]:
    """The largest event time per input (µs; None: none yet) over ``known`` (the progress before
    a version) and ``rows`` (each input's rows of the version). Over one partition's rows this is
    what the partition knows; over all partitions' rows, the global progress after the version."""
    return tuple(_max(old, _max_time(table, spec.time)) for old, table, spec in zip(known, rows, operator.inputs))


def processing_after(before: Progress, progress: tuple[int | None, ...], rows: tuple[pa.Table, ...],
                     now: int | None) -> Progress:
    """What a partition records of processing time after a version: ``before`` (the global
    progress before it) moved by ``now``, the version's processing time, when the partition has
    rows (a version's processing time travels with its rows, as in Spark, so every runner records
    the same). An input whose event-time progress these rows advanced (``progress`` differs from
    ``before.max_times``), or that has had no row yet and no time recorded, advanced at ``now``;
    the others keep theirs. Without ``now`` nor any earlier time it records none."""
    if now is None or not any(table.num_rows for table in rows):
        return Progress(progress, before.now, before.advanced_at)
    known = before.advanced_at or (None,) * len(progress)
    advanced = tuple(now if (value != old or (value is None and at is None)) else at
                     for value, old, at in zip(progress, before.max_times, known))
    return Progress(progress, _max(before.now, now), advanced)


def _metrics(operator: Operator, task: TaskInfo, rows: tuple[pa.Table, ...], result: StepResult,
             store: OpenStore, stats: Any) -> dict[str, Any]:
    opened = store.opened
    metrics: dict[str, Any] = {
        "version": task.version,
        "partition": task.partition,
        "attempt": task.attempt,
        "output_rows": result.output.num_rows,
        "state_entries_estimate": stats.entries,
        "state_bytes": stats.bytes,
        "state_open": opened.how.value,
        # its state opened from the local directory, not kept warm in this process (a worker that
        # did not run the partition's previous task, a store evicted, a restart)
        "state_reopened": opened.how is OpenHow.REUSED and not opened.warm and opened.target_version is not None,
        "state_open_seconds": round(store.seconds, 6),
        "state_versions_replayed": opened.versions,
        "entries_restored": opened.entries_restored,
    }
    for spec, table, aside in zip(operator.inputs, rows, result.set_aside):
        metrics[f"input_rows_{spec.name}"] = table.num_rows
        metrics[f"set_aside_rows_{spec.name}"] = aside.num_rows
        metrics[f"late_rows_{spec.name}"] = _late(aside)
    metrics.update(result.metrics)
    return metrics


def _late(aside: pa.Table) -> int:
    """How many of the rows set aside were late (reason ``late``, ``late change``...)."""
    if aside.num_rows == 0 or REASON_COLUMN not in aside.column_names:
        return 0
    return int(pc.sum(pc.starts_with(aside.column(REASON_COLUMN), "late")).as_py() or 0)


def _last_snapshot(log: Changelog, before: int) -> int:
    snapshots = [v for v in log.snapshot_versions() if v < before]
    return max(snapshots) if snapshots else -1


def _max_time(table: pa.Table, column: str | None) -> int | None:
    if column is None or table.num_rows == 0:
        return None
    values = table.column(column)
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.timestamp("us")).cast(pa.int64())
    result = pc.max(values).as_py()
    return None if result is None else int(result)


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return a if a >= b else b
