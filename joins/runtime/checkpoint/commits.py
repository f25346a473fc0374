"""Commit records: ``commits/v=<v>/p=<p>.of=<n>.t=<t0>_<t1>[.pt=<now>_<a0>_<a1>].json``, one per
partition and version, and the evidence that a join has committed versions.

A record's name carries the largest event time per input over all partitions' rows up to its
version (``x``: none yet), its content also the partition's metrics. A task learns the watermark
inputs from one listing of the previous version's records (no read per partition), and records
are pruned with the changelog's retention, so the files a version adds, and the calls a task
makes, do not grow with the partition count. A base (``base.t=<...>.json``, partition ``-1``)
stands for a version's records after a rewrite of the state that did not keep them.

A join that reads processing time (``idle_timeout``) adds ``pt=``: the latest processing time known
up to the version (``now``) and, per input, the processing time at which its progress last
advanced (``a_i``), all in microseconds (``x``: none). A record without it (an older checkpoint,
or a join without the option) knows no processing time: no input of it is ever idle.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Any, Mapping

import pyarrow.fs as pafs

from streamjoin.changelog.format import Kind, parse_name
from streamjoin.errors import CheckpointDamagedError
from streamjoin.runtime.checkpoint.files import CheckpointFiles, version_of

__all__ = ["COMMITS", "CommitRecord", "Commits", "Progress"]

COMMITS = "commits"


@dataclass(frozen=True)
class CommitRecord:
    """What a commit record's name says: its version, partition (of ``partitions``), and the
    global progress (largest event time per input) over every version up to and including it."""

    version: int
    partition: int
    partitions: int
    max_times: tuple[int | None, ...]
    now: int | None = None
    advanced_at: tuple[int | None, ...] = ()


@dataclass(frozen=True)
class Progress:
    """The global progress up to a version: the largest event time per input (``max_times``), and
    in processing time (µs; None: not known) the latest known (``now``) and when each input's
    event-time progress last advanced (``advanced_at``; empty: not known for any input)."""

    max_times: tuple[int | None, ...]
    now: int | None = None
    advanced_at: tuple[int | None, ...] = ()


class Commits:
    """Reads and writes one checkpoint's commit records (see module)."""

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files

    def write(self, version: int, partition: int, partitions: int,
              max_times: tuple[int | None, ...], metrics: Mapping[str, Any],
              processing: Progress | None = None) -> None:
        """Record that ``partition`` (of ``partitions``) finished ``version``: the global event-time
        progress including its rows (in the name, so one listing reads every partition's), the
        processing times of ``processing`` when it knows one (``now`` not None), and its
        metrics. Written again for the same version (a task or batch executed again), it replaces
        the record there; a record of the partition under other values is removed after it, and
        so is a record of any partition under another partition count (the version executed
        before with another count: a restarted query that rescaled as it ran the version again,
        whose partitions beyond the new count write no record to replace theirs)."""
        directory = f"{COMMITS}/v={version}"
        name = _commit_name(partition, partitions, max_times, processing)
        self.files.write_json(f"{directory}/{name}", {
            "version": version, "partition": partition, "partitions": partitions,
            "max_times": list(max_times), "metrics": dict(metrics)})
        stale = [i.path for i in self.files.entries(directory)
                 if i.is_file and i.base_name != name and _superseded(version, i.base_name, partition, partitions)]
        for path in stale:
            self.files.delete_file(path)

    def write_progress_base(self, version: int, max_times: tuple[int | None, ...]) -> None:
        """Record a base for the watermark inputs of the versions after ``version``: they start
        from the maximum of it and that version's commit records. For a rewrite of the state
        between versions (rescaling) that does not keep the commit records of ``version``; the
        base alone makes the version's records complete. Partition ``-1`` in :meth:`records`."""
        times = "_".join("x" if t is None else str(int(t)) for t in max_times)
        self.files.write_json(f"{COMMITS}/v={version}/base.t={times}.json", {"base": True, "max_times": list(max_times)})

    def records(self, version: int) -> list[CommitRecord]:
        """Every partition's record of ``version`` (one listing, no reads), by partition; raises
        :class:`CheckpointDamagedError` for a file there that is not a commit record."""
        found = []
        for info in self.files.entries(f"{COMMITS}/v={version}"):
            if not info.is_file:
                continue
            record = _parse_commit(version, info.base_name)
            if record is None:
                where = self.files.location(self.files.rel(info.path))
                raise CheckpointDamagedError(
                    f"checkpoint record {where} is damaged (not the name of a "
                    "commit record); restore it from a copy of the checkpoint, or start the join from a "
                    "new checkpoint location", path=where)
            found.append(record)
        return sorted(found, key=lambda r: r.partition)

    def watermark_inputs(self, before: int, n_inputs: int) -> tuple[int | None, ...]:
        """The largest event time per input over every partition's rows in versions before ``before``
        (:meth:`progress_before`'s ``max_times``)."""
        return self.progress_before(before, n_inputs).max_times

    def progress_before(self, before: int, n_inputs: int, committed: str | None = None) -> Progress:
        """The global progress over every partition's rows in versions before ``before``.

        Read from the commit records of the newest version before ``before`` (each carries the
        global progress up to its version): one listing when that version is ``before - 1``, three
        at most otherwise. Raises :class:`CheckpointDamagedError` when a partition's record of that
        version is missing or damaged: the watermark would be another one on another partition;
        and when ``committed`` (a file showing that version ``before - 1`` was committed, e.g. a
        partition's delta of it) is given but no record of ``before - 1`` is there: the watermark
        would be an older version's (see :meth:`_check_recorded`).
        """
        records = self.records(before - 1)
        if not records and committed is not None:
            self._check_recorded(before - 1, committed)
        if not records:
            older = [v for v in self.versions() if v < before - 1]
            records = self.records(older[-1]) if older else []
        if not records:
            return Progress((None,) * n_inputs)
        self._check_complete(records)
        return _combine_progress(records, n_inputs)

    def newest_progress(self, n_inputs: int) -> tuple[int, tuple[int | None, ...]] | None:
        """``(version, progress)`` of the newest version every partition has committed (a version
        being written is skipped); None before the first. For the driver (the flush source)."""
        for version in reversed(self.versions()):
            records = self.records(version)
            if records and _complete(records):
                return version, _combine(records, n_inputs)
        return None

    def read_progress(self, partition: int, before: int) -> tuple[int | None, ...] | None:
        """The global progress ``partition`` recorded in its newest version ``< before``; None if
        it has none (read from names only: one listing of the versions, one per version tried)."""
        for version in reversed([v for v in self.versions() if v < before]):
            for record in self.records(version):
                if record.partition == partition:
                    return record.max_times
        return None

    def _check_recorded(self, version: int, committed: str) -> None:
        """Refuse to run the version after ``version`` when ``version`` has no commit record at all
        although ``committed`` shows it was committed.

        A version's records are written by its tasks after their changelog deltas, and the query
        (Spark's commit log, or an in-process runner) starts the next version only once every task
        of it finished. So a task of ``version + 1`` whose partition holds the delta of ``version``
        finds its records unless they were lost (a partial copy of the checkpoint). A crash
        during ``version`` leaves the same files, but then ``version`` itself is executed again,
        which reads the records of the version before it: that state is normal and runs on."""
        where = self.files.location(f"{COMMITS}/v={version}")
        raise CheckpointDamagedError(
            f"checkpoint {self.files.uri}: version {version} was committed ({committed}) but none of its "
            f"commit records ({where}/p=*.json) is there, so the global watermark after it is unknown: "
            f"version {version + 1} would run with an older version's watermark and join rows it must "
            f"set aside as late. Restore {where} from the copy of the checkpoint this one was taken "
            "from (with the state/ folder of the same moment), or start the join from a new "
            "checkpoint location; `streamjoin checkpoint verify` lists what is missing", path=where)

    def _check_complete(self, records: list[CommitRecord]) -> None:
        if _complete(records):
            return
        version = records[0].version
        parts = [r for r in records if r.partition >= 0]
        counts = sorted({r.partitions for r in parts})
        wanted = set(range(max(counts)))
        missing = sorted(wanted - {r.partition for r in parts})
        where = self.files.location(f"{COMMITS}/v={version}")
        raise CheckpointDamagedError(
            f"checkpoint {self.files.uri}: the commit records of version {version} ({where}) are "
            + (f"missing for partitions {missing}" if missing else f"of different partition counts {counts}")
            + "; every partition records each version it commits, so the watermark would differ "
            "between partitions. Restore the directory from a copy of the checkpoint, or start the "
            "join from a new checkpoint location", path=where)

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every retained metrics record (from the commit records), ordered by (version, partition).
        Raises :class:`CheckpointDamagedError` for a record that cannot be read."""
        records = []
        for info in self.files.entries(COMMITS, recursive=True):
            if info.is_file and info.path.endswith(".json") and not info.base_name.startswith("base."):
                rel = self.files.rel(info.path)
                data = self.files.read_json(rel) or {}
                if not isinstance(data.get("metrics"), dict):
                    raise CheckpointDamagedError(
                        f"checkpoint record {self.files.location(rel)} is damaged (no metrics); "
                        "restore it from a copy of the checkpoint", path=self.files.location(rel))
                records.append(data["metrics"])
        return sorted(records, key=lambda r: (r.get("version", 0), r.get("partition", 0)))

    def versions(self) -> list[int]:
        """The versions that have commit records, ascending."""
        return sorted(v for v in (version_of(i.path) for i in self.files.entries(COMMITS)
                                  if i.type == pafs.FileType.Directory) if v >= 0)

    def newest_version(self) -> int | None:
        """The newest version with a commit record (the last one committed); None before the first."""
        versions = self.versions()
        return versions[-1] if versions else None

    def prune(self, keep_from: int) -> None:
        """Delete the commit records of versions older than ``keep_from`` (whole version
        directories; run by one partition, as no task of those versions runs any more). The
        newest version before ``keep_from`` is kept: it carries the progress of all before it."""
        old = [v for v in self.versions() if v < keep_from]
        for version in old[:-1]:
            self.files.delete_dir(f"{COMMITS}/v={version}")

    def has_state(self) -> bool:
        """Whether any partition has committed a version (a changelog file exists)."""
        selector = pafs.FileSelector(self.files.path("state"), recursive=True, allow_not_found=True)
        return any(info.is_file for info in self.files.fs.get_file_info(selector))

    def committed_before(self, version: int) -> list[str]:
        """What in this checkpoint shows that the join committed a version before ``version``
        (a changelog file, commit records, used initial rows), as short descriptions;
        empty when nothing does (a new join, or one whose first version is ``version``)."""
        files = self.files
        found: list[str] = []
        for info in files.entries("state", recursive=True):
            parsed = parse_name(posixpath.basename(info.path), info.size or 0) if info.is_file else None
            # a first version k > 0 begins its log with an empty snapshot at k - 1: not evidence
            base = version - 1 if parsed is not None and parsed.kind is Kind.SNAPSHOT else version
            if parsed is not None and parsed.version < base:
                found.append(f"changelog file {files.rel(info.path)}")
                break
        for info in files.entries(COMMITS):
            if info.type == pafs.FileType.Directory and 0 <= version_of(info.path) < version:
                found.append(f"commit records {files.rel(info.path)}")
                break
        for info in files.entries("initial/used"):
            used = files.read_json(files.rel(info.path)) if info.is_file else None
            if used is not None and int(used.get("version", version)) < version:
                found.append(f"initial rows taken in version {used['version']} ({files.rel(info.path)})")
                break
        return found


def _commit_name(partition: int, partitions: int, max_times: tuple[int | None, ...],
                 processing: Progress | None = None) -> str:
    """``p=<p>.of=<n>.t=<t0>_<t1>.json``, an absent time written ``x``; with a processing time
    known, ``.pt=<now>_<a0>_<a1>`` before ``.json``."""
    name = f"p={partition}.of={partitions}.t={_times(max_times)}"
    if processing is not None and processing.now is not None:
        advanced = processing.advanced_at or (None,) * len(max_times)
        name += f".pt={_times((processing.now, *advanced))}"
    return name + ".json"


def _times(values: tuple[int | None, ...]) -> str:
    return "_".join("x" if t is None else str(int(t)) for t in values)


def _read_times(text: str) -> tuple[int | None, ...]:
    return tuple(None if t == "x" else int(t) for t in text.split("_")) if text else ()


def _superseded(version: int, name: str, partition: int, partitions: int) -> bool:
    """Whether the record ``name`` of ``version`` is replaced by a record of ``partition`` of
    ``partitions``: one of the same partition, or of any partition under another partition count
    (never a base, nor a file that is no record, which :meth:`Commits.records` reports)."""
    record = _parse_commit(version, name)
    return record is not None and record.partition >= 0 and (
        record.partition == partition or record.partitions != partitions)


def _parse_commit(version: int, name: str) -> CommitRecord | None:
    """The record a commit record's file name describes (a base: partition -1); None for any other."""
    parts = name.removesuffix(".json").split(".")
    if len(parts) == 2 and parts[0] == "base" and parts[1].startswith("t=") and name.endswith(".json"):
        parts = ["p=-1", "of=0", parts[1]]
    if not name.endswith(".json") or len(parts) not in (3, 4) or not parts[0].startswith("p=") \
            or not parts[1].startswith("of=") or not parts[2].startswith("t=") \
            or (len(parts) == 4 and not parts[3].startswith("pt=")):
        return None
    try:
        times = _read_times(parts[2][2:])
        partition = -1 if parts[0] == "p=-1" else int(parts[0][2:]) if parts[0][2:].isdigit() else None
        if partition is None:
            return None
        if len(parts) == 4:
            processing = _read_times(parts[3][3:])
            if len(processing) != len(times) + 1:
                return None
            return CommitRecord(version, partition, int(parts[1][3:]), times, processing[0], processing[1:])
        return CommitRecord(version, partition, int(parts[1][3:]), times)
    except ValueError:
        return None


def _complete(records: list[CommitRecord]) -> bool:
    """Whether ``records`` (one version's) hold every partition of one partition count, or a base."""
    parts = [r for r in records if r.partition >= 0]
    if not parts:
        return bool(records)
    counts = {r.partitions for r in parts}
    return len(counts) == 1 and {r.partition for r in parts} == set(range(counts.pop()))


def _combine(records: list[CommitRecord], n_inputs: int) -> tuple[int | None, ...]:
    return _largest([r.max_times for r in records], n_inputs)


def _combine_progress(records: list[CommitRecord], n_inputs: int) -> Progress:
    """The records' global progress: each value the largest the records carry (each partition's
    record is what it knows; the one whose rows advanced an input knows the latest)."""
    now = _largest([(r.now,) for r in records], 1)[0]
    advanced = _largest([r.advanced_at for r in records], n_inputs)
    return Progress(_combine(records, n_inputs), now, advanced if any(a is not None for a in advanced) else ())


def _largest(rows: list[tuple[int | None, ...]], width: int) -> tuple[int | None, ...]:
    """Per position, the largest value that is not None over ``rows`` (None where none is)."""
    result: list[int | None] = [None] * width
    for row in rows:
        for i, value in enumerate(row[:width]):
            current = result[i]
            if value is not None and (current is None or value > current):
                result[i] = value
    return tuple(result)
