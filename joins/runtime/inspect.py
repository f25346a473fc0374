"""A whole join checkpoint at a glance, and a check of every file in it (no store opened, no Spark).

:func:`describe_checkpoint` gives the binding (definition, partitions, kind of run, query id) and,
per partition, its changelog's restorable versions, size and newest snapshot, its watermark input
(from the newest commit record) and the rows it set aside by reason. :func:`verify_checkpoint` checks every
changelog (checksums, gaps, missing snapshots) and every record (readable JSON, a commit record of the
newest version and a changelog per partition) and returns what is damaged or missing, each naming its file. A
``table_table_join`` checkpoint holds one checkpoint per stage; both functions cover each stage.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable

import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from streamjoin.changelog import Changelog
from streamjoin.changelog.inspect import describe, verify
from streamjoin.errors import JoinDefinitionError, JoinError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.keygroups import check_count, check_key_groups
from streamjoin.runtime.operator import REASON_COLUMN
from streamjoin.runtime.plan import recorded_stages
from streamjoin.runtime.rescale import Epoch, changelog_uri, current_epoch, epoch_has_run, epochs

__all__ = ["PartitionReport", "CheckpointReport", "describe_checkpoint", "verify_checkpoint", "stage_checkpoints"]

#: The stages of a table-table join checkpoint written before plans recorded their stages
#: (:data:`streamjoin.runtime.plan.STAGES_FILE`): read only where the folder records none.
_UNRECORDED_STAGES = ("left_keys", "right_keys", "join")

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

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def stage_checkpoints(uri: str) -> list[str]:
    """``uri`` if it is a join checkpoint, else its stages' checkpoints (a table-table join's).
    Raises :class:`JoinDefinitionError` when it is neither."""
    cp = Checkpoint(uri)
    if _exists(cp, _BINDING):
        return [cp.uri]
    names = recorded_stages(cp.files) or _UNRECORDED_STAGES
    stages = [f"{cp.uri.rstrip('/')}/{s}" for s in names if _exists(cp, f"{s}/{_BINDING}")]
    if not stages:
        raise JoinDefinitionError(f"{uri} is not a join checkpoint (it has no {_BINDING}, nor stages with one)")
    return stages


def describe_checkpoint(uri: str, progress: Progress | None = None) -> CheckpointReport:
    """The binding and every partition of the join checkpoint at ``uri`` (one stage's)."""
    cp = Checkpoint(uri)
    binding = _binding(cp)
    epoch = current_epoch(cp)   # after a rescale, the newest partitioning (streamjoin.runtime.rescale)
    partitions = epoch.partitions
    newest = _newest_records(cp)
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
        mode=binding.get("mode"), query_id=cp.binding.bound_query(), definition=binding.get("definition", {}),
        newest_version=cp.commits.newest_version(), parts=tuple(parts))


def verify_checkpoint(uri: str, progress: Progress | None = None) -> list[str]:
    """What is damaged or missing in the join checkpoint at ``uri`` (one stage's); empty if nothing."""
    cp = Checkpoint(uri)
    try:
        binding = _binding(cp)
    except JoinError as exc:
        return [str(exc)]
    problems: list[str] = []
    found = epochs(cp)
    epoch = found[-1] if found else current_epoch(cp)
    problems += _impossible_partitioning(cp, binding, found)
    partitions = max(epoch.partitions, 0)
    ran_here = epoch_has_run(cp, found, epoch.number) if found else False
    streaming = binding.get("mode") != "batch"
    ran = cp.commits.newest_version() is not None
    try:
        newest = _newest_records(cp)
    except JoinError as exc:
        problems.append(str(exc))
        newest = None
    for p in range(partitions):
        log = Changelog(changelog_uri(cp, epoch, p))
        if ran_here and log.listing().empty:   # (a new epoch's logs wait for its first run)
            where = f" of partitioning epoch {epoch.number} ({partitions} partitions)" if epoch.number else ""
            problems.append(f"partition {p}: changelog {log.uri}{where} is missing or empty")
        problems += [f"partition {p}: {exc}" for exc in verify(log)]
        if streaming and ran and newest is not None and p not in newest and not log.listing().empty:
            problems.append(f"partition {p}: no commit record of version {cp.commits.newest_version()} "
                            f"under {cp.uri}/commits")
        if progress is not None:
            progress(p + 1, partitions)
    problems += _unreadable_records(cp, ("query.json", "flush.json", "initial", "commits"))
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
        reasons = pq.read_table(info.path, columns=[REASON_COLUMN], filesystem=cp.fs).column(REASON_COLUMN)
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
