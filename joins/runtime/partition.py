"""Running one partition of an operator for one version: the engine-free half of the runtime.

``run_partition`` is what a Spark task does (the Spark layer only gathers the rows and hands back
the output), and what the in-process runner of the tests does, so both execute the same code:

1. refuse a checkpoint of another query (or, for a batch task, of any streaming query);
2. compute the global event-time progress before version ``v`` from the names of the commit
   records of the version before (one listing; the same on every partition and on every
   re-execution);
3. open the partition's local store at the last committed version before ``v``: reused, rolled
   forward or back, or rebuilt from the changelog. A partition starts empty only when the
   checkpoint shows the join has committed nothing before ``v``; a changelog that is missing
   while the checkpoint shows earlier versions raises :class:`CheckpointDamagedError`;
4. run the operator on the rows;
5. commit version ``v``: the changelog delta first, then the local store with its version marker;
   write a snapshot every ``snapshot_every`` versions;
6. write the rows set aside, then this partition's commit record (progress and metrics).

A task that fails anywhere before step 5 leaves the state at ``v-1``; one that fails after it left
version ``v`` committed, and executing ``v`` again first returns the store to ``v-1``.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changelog import Changelog, open_logged_store, owner_tag, release_logged_store, snapshot_from_store
from streamjoin.errors import CheckpointDamagedError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.keygroups import check_count
from streamjoin.runtime.operator import REASON_COLUMN, Operator, StepInput
from streamjoin.runtime.rescale import changelog_uri, epoch_dir, prepare_partition
from streamjoin.statestore.errors import BackendNotFoundError
from streamjoin.statestore.registry import resolve_backend

__all__ = ["StateConfig", "TaskInfo", "run_partition", "global_max_times", "progress_after", "default_local_dir"]


def default_local_dir() -> str:
    """Where local stores live unless configured: under the system's temporary directory."""
    return os.path.join(tempfile.gettempdir(), "streamjoin-state")


@dataclass(frozen=True)
class StateConfig:
    """Where and how partitions keep state (``local_dir`` None: :func:`default_local_dir`).

    ``store`` is checked when the config is made (its module imported): an unknown kind raises
    :class:`JoinDefinitionError` naming the valid ones, before any task runs; so are
    ``snapshot_every`` (an int of at least 1) and ``retain_versions`` (at least 2: a version
    executed again restores the one before it).
    """

    store: str = "rocksdb"
    store_options: Mapping[str, Any] = field(default_factory=dict)
    local_dir: str | None = None
    snapshot_every: int = 10
    retain_versions: int = 10
    #: Keep a partition's local store open in this process after a streaming query's task, for
    #: its next task (reused only at exactly the version wanted; see :mod:`streamjoin.statestore.warm`).
    keep_warm: bool = True
    #: The checkpoint holds initial rows for the first version (``Checkpoint.write_initial``):
    #: set by ``run_operator`` and ``LocalRunner`` when it does, so that other joins look for them
    #: only in a partition's first version, not in every task.
    initial: bool = False
    #: Testing only: a path prefix; a task finding ``<prefix>.<point>.v<version>.p<partition>``
    #: deletes it and fails, once (points: ``before-commit``, ``after-commit``).
    fail_once: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.store, str):
            raise JoinDefinitionError(f"store must be a store kind (a str), not {self.store!r}")
        try:
            resolve_backend(self.store)
        except BackendNotFoundError as exc:
            raise JoinDefinitionError(f"store={self.store!r}: {exc}") from exc
        check_count(self.snapshot_every, "snapshot_every")
        check_count(self.retain_versions, "retain_versions", least=2)   # (re-execution restores v-1)


@dataclass(frozen=True)
class TaskInfo:
    """Which version and partition a task runs, and in which query."""

    version: int
    partition: int
    partitions: int
    attempt: int = 0
    final: bool = False
    query_id: str | None = None


def local_store_path(config: StateConfig, checkpoint: Checkpoint, partition: int, epoch: str = "") -> str:
    """The partition's local store directory, unique to the checkpoint and the partitioning epoch
    (``epoch``: :func:`streamjoin.runtime.rescale.epoch_dir`) it belongs to."""
    digest = hashlib.sha256(checkpoint.uri.encode()).hexdigest()[:16]
    return os.path.join(config.local_dir or default_local_dir(), digest, f"{epoch}p={partition}")


def store_owner(operator: Operator, checkpoint: Checkpoint, task: TaskInfo, epoch: int) -> bytes:
    """The owner tag of the partition's local store: the store proves it holds this checkpoint's
    (and query's) state of this operator, partitioning epoch and partition before it is reused,
    and is rebuilt from the changelog otherwise."""
    return owner_tag(checkpoint.uri, task.query_id, operator.kind, epoch, task.partition)


def global_max_times(checkpoint: Checkpoint, version: int, n_inputs: int) -> tuple[int | None, ...]:
    """Largest event time per input over all partitions' rows in versions before ``version``.

    Read from the commit records of the newest version before ``version`` (one listing, see
    :meth:`Checkpoint.watermark_inputs`); each record carries the global progress up to its
    version, so the value survives a change of the partition count (a rescale needs no base).
    """
    return checkpoint.commits.watermark_inputs(version, n_inputs)


def run_partition(
    operator: Operator,
    checkpoint: Checkpoint,
    config: StateConfig,
    task: TaskInfo,
    rows: tuple[pa.Table, ...],
) -> tuple[pa.Table, dict[str, Any]]:
    """Run ``operator`` on one partition's rows of one version; return its output and metrics."""
    checkpoint.binding.check_query(task.query_id)
    n_inputs = len(operator.inputs)
    epoch = prepare_partition(operator, checkpoint, config.store, dict(config.store_options),
                              config.local_dir or default_local_dir(), task.version, task.partition,
                              task.partitions, config.retain_versions)   # rebuilt after a rescale
    known = global_max_times(checkpoint, task.version, n_inputs)
    max_times = (None,) * n_inputs if task.final else known
    log = Changelog(changelog_uri(checkpoint, epoch, task.partition), retain_versions=config.retain_versions,
                    cache_listing=True)
    target = _target(checkpoint, log, task)
    initial = (0,) * n_inputs
    if config.initial or target is None:   # only a first version, or its re-execution, takes them
        rows, initial = _with_initial(rows, _initial_rows(operator, checkpoint, task, first=target is None))
    started = time.perf_counter()
    store, opened = open_logged_store(
        config.store, local_store_path(config, checkpoint, task.partition, epoch_dir(epoch)), log, target,
        warm=_keep_warm(config, task), owner=store_owner(operator, checkpoint, task, epoch.number),
        **dict(config.store_options),
    )
    open_seconds = time.perf_counter() - started
    try:
        result = operator.step(store, StepInput(task.version, task.partition, rows, max_times, task.final))
        _maybe_fail_once(config, task, "before-commit")
        store.write(result.puts, result.deletes, result.delete_ranges, version=task.version)
        if target is None or task.version - _last_snapshot(log, task.version) >= config.snapshot_every:
            snapshot_from_store(log, store, task.version)
        stats = store.stats()
    except BaseException:
        store.close()
        raise
    release_logged_store(store)   # kept open for the partition's next task in this process
    metrics = _metrics(operator, task, rows, result, opened, open_seconds, stats)
    for spec, count in zip(operator.inputs, initial):
        if count:
            metrics[f"initial_rows_{spec.name}"] = count
    progress = progress_after(operator, known, rows)
    for spec, value in zip(operator.inputs, progress):
        if value is not None:
            metrics[f"max_time_{spec.name}"] = value
    _write_records(operator, checkpoint, task, result, metrics, progress, config.retain_versions)
    _maybe_fail_once(config, task, "after-commit")
    return result.output, metrics


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
    if any(v < task.version for v in listing.restorable()):
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


def _initial_rows(operator: Operator, checkpoint: Checkpoint, task: TaskInfo, first: bool) -> tuple:
    """The initial rows (:meth:`Checkpoint.write_initial`) of each input for this task, if its
    version is the partition's first: the one that found no earlier state, recorded before it
    commits so that executing it again (even after a base snapshot was written) reads them too."""
    used = checkpoint.initial.used(task.partition)
    if (used is None and not first) or (used is not None and used != task.version):
        return (None,) * len(operator.inputs)
    tables = tuple(checkpoint.initial.read(spec.name, task.partition) for spec in operator.inputs)
    if used is None and any(t is not None for t in tables):
        checkpoint.initial.mark_used(task.partition, task.version)
    return tables


def _with_initial(rows: tuple[pa.Table, ...], initial) -> tuple[tuple[pa.Table, ...], tuple[int, ...]]:
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


def _write_records(operator, checkpoint, task, result, metrics, progress, retain_versions: int) -> None:
    """Rows set aside (Parquet, only when there are some), then the commit record (progress and
    metrics in one durable file); old commit records are pruned with the changelog's retention
    (whole versions, by partition 0)."""
    for spec, aside in zip(operator.inputs, result.set_aside):
        if aside.num_rows:
            checkpoint.set_aside.write(spec.name, task.version, task.partition, aside)
    checkpoint.commits.write(task.version, task.partition, task.partitions, progress, metrics)
    if task.partition == 0:
        checkpoint.commits.prune(keep_from=task.version - retain_versions + 1)


def _metrics(operator, task, rows, result, opened, open_seconds, stats) -> dict[str, Any]:
    metrics: dict[str, Any] = {
        "version": task.version,
        "partition": task.partition,
        "attempt": task.attempt,
        "output_rows": result.output.num_rows,
        "state_rows": stats.entries,
        "state_bytes": stats.bytes,
        "state_open": opened.how.value,
        "state_open_seconds": round(open_seconds, 6),
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
