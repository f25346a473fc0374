"""A whole join checkpoint at a glance, and a check of every file in it (no store opened, no Spark).

:func:`describe_checkpoint` gives the binding (definition, partitions, kind of run, query id) and,
per partition, its changelog's restorable versions, size and newest snapshot, its watermark input
(from the newest commit record) and the rows it set aside by reason. :func:`check_checkpoint` checks every
changelog (checksums, gaps, missing snapshots), every record (readable JSON, the newest versions' commit
records against the changelogs) and every set-aside file (a whole Parquet file), and returns what is
damaged or missing, each naming its file, apart from notes on normal states (a version half committed
when a query stopped); :func:`verify_checkpoint` returns the problems alone. A ``table_table_join``
checkpoint holds one checkpoint per stage; the functions cover one stage each.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import pyarrow.compute as pc
import pyarrow.fs as pafs

from streamjoin.changelog import Changelog
from streamjoin.changelog.inspect import describe, verify
from streamjoin.errors import JoinDefinitionError, JoinError
from streamjoin.runtime.checkpoint import Checkpoint, resolve_location
from streamjoin.runtime.checkpoint.binding import migration_needed
from streamjoin.runtime.checkpoint.files import CheckpointFiles
from streamjoin.runtime.keygroups import check_count, check_key_groups
from streamjoin.runtime.operator import REASON_COLUMN
from streamjoin.runtime.plan import UNRECORDED_STAGES, recorded_stages
from streamjoin.runtime.rescale import Epoch, changelog_uri, current_epoch, epoch_has_run, epochs, state_epoch

__all__ = ["PartitionReport", "CheckpointReport", "Verification", "describe_checkpoint", "verify_checkpoint",
           "check_checkpoint", "spark_commits", "stage_checkpoints"]


_BINDING = "streamjoin.json"
#: ``progress(done, total)``: called as partitions are read.
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class PartitionReport:
    """One partition: its changelog, watermark input and set-aside rows."""

    partition: int
    versions: tuple[int, ...]
    changelog_bytes: int
    changelog_files: int
    snapshot_version: int | None
    snapshot_entries: int | None
    max_times: tuple[int | None, ...] | None
    set_aside: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class CheckpointReport:
    """A join checkpoint: its binding and every partition (one per stage for a table join)."""

    uri: str
    kind: str
    partitions: int
    mode: str | None
    query_id: str | None
    definition: dict[str, Any]
    newest_version: int | None
    parts: tuple[PartitionReport, ...]
    #: the schema evolutions of the inputs since the join was first defined, oldest first, each
    #: its changes (e.g. ``table: added region (string)``); ``definition`` is the newest
    evolutions: tuple[tuple[str, ...], ...] = ()
    #: after ``checkpoint repartition`` or ``checkpoint migrate``, until the query's next run: the
    #: partition count that run rebuilds the state into (``parts`` and ``partitions`` are then
    #: the partitions holding the state now); None otherwise
    rebuild_into: int | None = None
    #: the initial rows its first version took or will take, by input (a bootstrap) or state side
    #: (``initial_state``, :mod:`streamjoin.runtime.initial_state`): how many; empty when none
    initial: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stage_checkpoints(uri: str) -> list[str]:
    """``uri`` if it is a join checkpoint, else its stages' checkpoints (a table-table join's).
    Raises :class:`JoinDefinitionError` when it is neither."""
    cp = Checkpoint(uri)
    if _exists(cp, _BINDING):
        return [cp.uri]
    names = recorded_stages(cp.files) or UNRECORDED_STAGES
    stages = [f"{cp.uri.rstrip('/')}/{s}" for s in names if _exists(cp, f"{s}/{_BINDING}")]
    if not stages:
        raise JoinDefinitionError(f"{uri} is not a join checkpoint (it has no {_BINDING}, nor stages with one)")
    return stages


def describe_checkpoint(uri: str, progress: Progress | None = None) -> CheckpointReport:
    """The binding and every partition of the join checkpoint at ``uri`` (one stage's)."""
    cp = Checkpoint(uri)
    binding = _binding(cp)
    found = epochs(cp, binding)
    # the partitioning holding the state: the newest unless a rescale or migration waits for a run
    epoch = state_epoch(cp, found)
    pending = found[-1] if found and found[-1].number != epoch.number else None
    partitions = epoch.partitions
    newest = _newest_records(cp)
    records = cp.binding.evolutions()
    parts = []
    for p in range(partitions):
        summary = describe(Changelog(changelog_uri(cp, epoch, p)))
        snapshot = summary.newest_snapshot
        parts.append(PartitionReport(
            partition=p, versions=summary.restorable, changelog_bytes=summary.total_bytes,
            changelog_files=len(summary.files), snapshot_version=None if snapshot is None else snapshot.version,
            snapshot_entries=None if snapshot is None else snapshot.entries,
            max_times=newest.get(p), set_aside=_set_aside(cp, p)))
        if progress is not None:
            progress(p + 1, partitions)
    return CheckpointReport(
        uri=cp.uri, kind=binding.get("definition", {}).get("kind", "join"), partitions=partitions,
        mode=binding.get("mode"), query_id=cp.binding.bound_query(),
        definition=cp.binding.history(binding, records)[-1],
        newest_version=cp.commits.newest_version(), parts=tuple(parts),
        evolutions=tuple(tuple(r.get("changes", ())) for r in records),
        rebuild_into=None if pending is None else pending.partitions,
        initial=cp.initial.done() or {})


@dataclass(frozen=True)
class Verification:
    """What :func:`check_checkpoint` found in one checkpoint: ``problems`` (damage, each naming its
    file and what to do) and ``notes`` (normal states worth knowing, each saying what the next run
    does: a version a stopped query had half committed)."""

    problems: list[str]
    notes: list[str]


def verify_checkpoint(uri: str, progress: Progress | None = None) -> list[str]:
    """What is damaged or missing in the join checkpoint at ``uri`` (one stage's); empty if
    nothing (:func:`check_checkpoint`'s problems)."""
    return check_checkpoint(uri, progress).problems


def check_checkpoint(uri: str, progress: Progress | None = None, spark_checkpoint: str | None = None) -> Verification:
    """Check every changelog, record and set-aside file of the join checkpoint at ``uri`` (one
    stage's). A version the query was committing when it stopped (some partitions' deltas or
    records of it written, not all) is a note, not a problem: the next run executes it again.
    ``spark_checkpoint``: the query's Spark ``checkpointLocation``; when given, a version its
    commit log has but whose commit records are missing here is a problem (records lost), as
    the next run would refuse it. Raises :class:`JoinDefinitionError` when ``spark_checkpoint``
    is not a Spark checkpoint."""
    committed = None if spark_checkpoint is None else spark_commits(spark_checkpoint)
    cp = Checkpoint(uri)
    try:
        binding = _binding(cp)
    except JoinError as exc:
        return Verification([str(exc)], [])
    problems: list[str] = []
    found = epochs(cp)
    epoch = found[-1] if found else current_epoch(cp)
    problems += _impossible_partitioning(cp, binding, found)
    partitions = max(epoch.partitions, 0)
    ran_here = epoch_has_run(cp, found, epoch.number) if found else False
    logs = []
    for p in range(partitions):
        log = Changelog(changelog_uri(cp, epoch, p), cache_listing=True)   # (only read here)
        if ran_here and log.listing().empty:   # (a new epoch's logs wait for its first run)
            where = f" of partitioning epoch {epoch.number} ({partitions} partitions)" if epoch.number else ""
            problems.append(f"partition {p}: changelog {log.uri}{where} is missing or empty")
        problems += [f"partition {p}: {exc}" for exc in verify(log)]
        logs.append(log)
        if progress is not None:
            progress(p + 1, partitions)
    try:
        state = _commit_state(cp, logs, committed)
    except JoinError as exc:
        problems.append(str(exc))
        state = Verification([], [])
    problems += state.problems
    problems += _unreadable_records(cp, ("query.json", "flush.json", "initial", "commits"))
    problems += _damaged_set_aside(cp)
    notes = list(state.notes)
    failed = cp.initial.failure() if cp.initial.done() is None else None
    if failed is not None:
        notes.append(f"the initial rows (bootstrap or initial_state) could not be written: {failed}; "
                     "the join's next definition writes them again, and its query runs no task before then")
    return Verification(problems, notes)


def spark_commits(location: str) -> set[int]:
    """The batch ids in the commit log of the Spark checkpoint at ``location`` (its ``commits/``
    folder: the micro-batches the query finished). Raises :class:`JoinDefinitionError` when
    ``location`` has neither ``commits/`` nor ``offsets/``."""
    files = CheckpointFiles(resolve_location(location))
    if not files.exists("commits") and not files.exists("offsets"):
        raise JoinDefinitionError(f"{location} is not a Spark checkpoint (it has no commits/ nor offsets/ folder); "
                                  "pass the checkpointLocation the query was started with")
    return {int(name) for name in files.names("commits") if name.isdigit()}


def _commit_state(cp: Checkpoint, logs: list[Changelog], committed: set[int] | None) -> Verification:
    """The newest versions' commit records against the partitions' changelogs (``logs``, of the
    current partitioning). A task writes its delta, then its record, and the query runs a version
    only once the one before has every record; so the normal states are: every partition recorded
    the newest version ``n``; ``n`` half recorded (a stop during ``n``); or ``n`` whole and some
    deltas of ``n + 1`` written, no record (a stop during ``n + 1``). Anything else, or one of those
    two when ``committed`` (Spark's commit log) has the version, is damage."""
    newest = cp.commits.newest_version()
    records = [] if newest is None else cp.commits.records(newest)
    recorded = sorted({r.partition for r in records if r.partition >= 0 and r.partitions == len(logs)})
    problems: list[str] = []
    for p in recorded:   # a record is written after the delta: its version is in the changelog
        restorable = logs[p].versions()
        if restorable and restorable[-1] < (newest or 0):
            problems.append(
                f"partition {p}: its commit record of version {newest} ({cp.files.location(f'commits/v={newest}')}) "
                f"shows the version committed, but its changelog {logs[p].uri} restores only up to version "
                f"{restorable[-1]}: the delta of version {newest} is missing. Restore the changelog from a copy "
                "of the checkpoint, or start the join from a new checkpoint location")
    notes: list[str] = []
    unrecorded = [p for p, log in enumerate(logs) if p not in recorded and not log.listing().empty] if recorded else []
    if unrecorded:
        _half_committed(cp, newest or 0, f"partitions {recorded} recorded it, partitions {unrecorded} did not",
                        committed, problems, notes, first=False)
    after = -1 if newest is None else newest
    ahead = {p: sorted(v for v in log.listing().deltas if v > after) for p, log in enumerate(logs)}
    ahead = {p: versions for p, versions in ahead.items() if versions}
    if ahead:
        first = after + 1 if newest is not None else min(v[0] for v in ahead.values())
        beyond = sorted({v for versions in ahead.values() for v in versions if v != first})
        if unrecorded or beyond:
            problems.append(
                f"partitions {sorted(ahead)}: their changelogs hold versions {sorted({v for vs in ahead.values() for v in vs})} "
                f"after version {newest}, the newest with commit records ({cp.files.location('commits')}), "
                "but a version starts only once the one before has every partition's record: commit records "
                "are missing. Restore the commits folder from a copy of the checkpoint (with the state folder "
                "of the same moment), or start the join from a new checkpoint location")
        else:
            _half_committed(cp, first, f"partitions {sorted(ahead)} wrote its changelog delta, no partition "
                            "its commit record", committed, problems, notes, first=newest is None)
    return Verification(problems, notes)


def _half_committed(cp: Checkpoint, version: int, what: str, committed: set[int] | None,
                    problems: list[str], notes: list[str], *, first: bool) -> None:
    """Report ``version`` half committed (``what``; ``first``: the join's first version): a note,
    or a problem when the query's Spark commit log (``committed``) has it."""
    where = cp.files.location(f"commits/v={version}")
    if committed is not None and version in committed:
        problems.append(
            f"version {version} was committed by the query (its Spark commit log has batch {version}), but "
            f"{what}: commit records were lost (e.g. a partial copy of the checkpoint), and the next run refuses "
            f"to start. Restore {where} from the copy of the checkpoint this one was taken from, or start the "
            "join from a new checkpoint location")
        return
    hint = "" if committed is not None else (
        f" (Had the query committed it, its checkpointLocation would have commits/{version}; then records "
        "were lost and the next run refuses to start: pass --spark-checkpoint to check.)")
    notes.append(
        f"version {version} is half committed: {what}. This is the state a query stopped or crashed during "
        f"version {version} leaves, and it is normal: the next run executes version {version} again, every "
        f"partition from {'an empty state' if first else f'version {version - 1}'}, so nothing is lost or "
        f"counted twice.{hint}")


def _damaged_set_aside(cp: Checkpoint) -> list[str]:
    """Every set-aside file that is not a whole Parquet file (its footer is read)."""
    problems = []
    for path in cp.set_aside.files_under():
        try:
            cp.set_aside.check(path)
        except JoinError as exc:
            problems.append(str(exc))
    return problems


def _impossible_partitioning(cp: Checkpoint, binding: dict[str, Any], found: list[Epoch]) -> list[str]:
    """A recorded key-group count or partition count no run can use (of 1 to the key groups)."""
    groups = binding.get("key_groups")
    if groups is None:   # written before key groups: one partition count, checked as the partitions
        groups = max((e.partitions for e in found), default=1)
    try:
        check_count(groups, "max_partitions")
    except JoinDefinitionError as exc:
        return [f"{cp.uri}/{_BINDING} records an impossible partitioning: {exc}; start the join from a new "
                "checkpoint location"]
    problems = []
    for epoch in found:
        try:
            check_key_groups(groups, epoch.partitions)
        except JoinDefinitionError as exc:
            record = _BINDING if epoch.number == 0 else f"partitioning/e={epoch.number}.json"
            problems.append(
                f"{cp.uri}/{record} records an impossible partitioning (epoch {epoch.number}): {exc}; no run "
                "can continue it. Restore the checkpoint from a copy, or delete that record if no run has used it")
    return problems


def _newest_records(cp: Checkpoint) -> dict[int, tuple[int | None, ...]]:
    """Each partition's watermark input in the newest version's commit records (one listing)."""
    newest = cp.commits.newest_version()
    records = [] if newest is None else cp.commits.records(newest)
    return {r.partition: r.max_times for r in records}


def _binding(cp: Checkpoint) -> dict[str, Any]:
    if not _exists(cp, _BINDING):
        raise JoinDefinitionError(f"{cp.uri} is not a join checkpoint: it has no {_BINDING}")
    with cp.fs.open_input_stream(posixpath.join(cp.root, _BINDING)) as fh:
        try:
            found = json.loads(fh.read())
        except ValueError as exc:
            raise JoinDefinitionError(f"{cp.uri}/{_BINDING} is damaged (not JSON: {exc})") from exc
    if isinstance(found, dict) and found.get("format") == 1:
        raise migration_needed(cp.uri)
    return found if isinstance(found, dict) else {}


def _exists(cp: Checkpoint, rel: str) -> bool:
    return cp.fs.get_file_info(posixpath.join(cp.root, rel)).type == pafs.FileType.File


def _files(cp: Checkpoint, rel: str) -> Iterable[pafs.FileInfo]:
    selector = pafs.FileSelector(posixpath.join(cp.root, rel), recursive=True, allow_not_found=True)
    return [i for i in cp.fs.get_file_info(selector) if i.is_file and not i.base_name.startswith(".")]


def _set_aside(cp: Checkpoint, partition: int) -> dict[str, dict[str, int]]:
    """Rows partition ``partition`` set aside, per input and reason."""
    counts: dict[str, dict[str, int]] = {}
    for info in _files(cp, "set_aside"):
        rel = posixpath.relpath(info.path, posixpath.join(cp.root, "set_aside"))
        if not rel.endswith(f"/p={partition}.parquet"):
            continue
        reasons = cp.set_aside.read(info.path, columns=[REASON_COLUMN]).column(REASON_COLUMN)
        by_input = counts.setdefault(rel.split("/")[0], {})
        for row in pc.value_counts(reasons).to_pylist():
            by_input[row["values"]] = by_input.get(row["values"], 0) + int(row["counts"])
    return counts


def _unreadable_records(cp: Checkpoint, folders: Iterable[str]) -> list[str]:
    """Every JSON record under ``folders`` (or the file itself) that is not a JSON object."""
    problems = []
    for folder in folders:
        infos = [i for i in _files(cp, folder) if i.path.endswith(".json")] if not folder.endswith(".json") \
            else ([cp.fs.get_file_info(posixpath.join(cp.root, folder))] if _exists(cp, folder) else [])
        for info in infos:
            try:
                with cp.fs.open_input_stream(info.path) as fh:
                    if not isinstance(json.loads(fh.read()), dict):
                        raise ValueError("not a JSON object")
            except (ValueError, UnicodeDecodeError) as exc:
                problems.append(f"record {posixpath.relpath(info.path, cp.root)} is damaged ({exc})")
    return problems
