"""One operator's checkpoint: its binding, its changelogs, and the per-version records beside them.

Layout under the checkpoint URI (a local path or a URI :func:`streamjoin.changelog.storage.resolve_uri`
accepts; resolved once, so every task of a query names the same place)::

    streamjoin.json                   what this checkpoint belongs to (definition, partitions, key
                                      groups, and whether a streaming query or a batch run writes it)
    partitioning/e=<n>.json           partitioning epoch n >= 1: a later partition count
                                      (:mod:`streamjoin.runtime.rescale`); its changelogs are
                                      ``state/e=<n>/p=<p>/``
    query.json                        the streaming query that writes it (bound by its first task)
    flush.json                        the flush source of the streaming query that writes it
                                      (bound on the driver, before any task runs)
    state/p=<p>/                      partition p's changelog (deltas and snapshots)
    commits/v=<v>/p=<p>.of=<n>.t=<t0>_<t1>.json
                                      partition p (of n) committed version v: the name carries the
                                      largest event time per input over all partitions' rows up
                                      to v (``x``: none yet), the content also its metrics
    set_aside/<input>/v=<v>/p=<p>.parquet   rows not processed (late, dead letters), with reasons
    initial/<input>/p=<p>.arrow       rows given to the join's first version (e.g. a bootstrap
                                      snapshot), routed to partition p; ``initial/done.json``
                                      marks the set complete, ``initial/used/p=<p>.json``
                                      the version that took them

Every file is written to a temporary name, made durable (``fsync`` on a local disk) and moved into
place, so a reader sees a whole file or none, and writing one again (a task or batch executed
again) replaces it with identical content. A task learns the watermark inputs from one listing of
the previous version's commit records (no read per partition), and commit records are pruned with
the changelog's retention, so the files a version adds, and the calls a task makes, do not grow
with the partition count. ``streamjoin.json`` and ``query.json`` are created only
if absent (atomically on a local disk; see :meth:`streamjoin.changelog.storage.Storage.write_if_absent`), so
of two runs binding a checkpoint at once exactly one wins and the other is compared with it. A
record that cannot be read raises :class:`CheckpointDamagedError` naming the file.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

from streamjoin.changelog.format import Kind, parse_name
from streamjoin.changelog.storage import Storage, filesystem_for, open_storage, resolve_uri
from streamjoin.errors import CheckpointDamagedError, CheckpointMismatchError, JoinDefinitionError

__all__ = ["Checkpoint", "CommitRecord", "FORMAT", "RunMode", "resolve_location"]

#: 2: progress and metrics in one commit record per partition and version (``commits/``)
FORMAT = 2

COMMITS = "commits"

#: checkpoint URI -> the query this process found it bound to (``query.json`` is never rewritten)
_BOUND: dict[str, str] = {}


@dataclass(frozen=True)
class CommitRecord:
    """What a commit record's name says: its version, partition (of ``partitions``), and the
    global progress (largest event time per input) over every version up to and including it."""

    version: int
    partition: int
    partitions: int
    max_times: tuple[int | None, ...]


class RunMode(str, Enum):
    """What writes a checkpoint: one streaming query, or batch runs (each one replaces the last)."""

    STREAMING = "streaming"
    BATCH = "batch"


def resolve_location(uri: str) -> str:
    """``uri`` in canonical form (:func:`streamjoin.changelog.storage.resolve_uri`); raises
    :class:`JoinDefinitionError` for a scheme that cannot be opened."""
    try:
        return resolve_uri(uri)
    except (ValueError, TypeError) as exc:
        raise JoinDefinitionError(f"checkpoint={uri!r}: {exc}") from exc


class Checkpoint:
    """Reads and writes one operator's checkpoint files (see module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = resolve_location(uri)
        self.fs, self.root = filesystem_for(self.uri)

    def __repr__(self) -> str:
        return f"Checkpoint({self.uri!r})"

    # -- binding --------------------------------------------------------------------------------

    def bind(
        self, definition: Mapping[str, Any], partitions: int, *, mode: RunMode = RunMode.STREAMING,
        key_groups: int | None = None,
    ) -> None:
        """Record what this checkpoint belongs to, or refuse if it belongs to something else.

        A new checkpoint records ``key_groups`` (None: ``DEFAULT_KEY_GROUPS``), the fixed number of
        key groups its state is kept by; another partition count is then accepted (the caller
        starts a new partitioning, :func:`streamjoin.runtime.rescale.bind_partitions`). A checkpoint
        of an earlier format (streamjoin 0.2's, without key groups) is refused.

        Raises :class:`JoinDefinitionError` (before writing anything) unless ``partitions`` is an
        int from 1 to the key groups and ``key_groups`` (if given) an int of at least 1, and
        :class:`CheckpointMismatchError` for another format, definition or ``key_groups``,
        and for another ``mode``: a batch run never writes a streaming query's checkpoint (it would
        replace the query's state by its own version 0) and a streaming query never continues a
        batch run's (whose state has every window closed). Of concurrent first binds one wins.
        """
        from streamjoin.runtime.keygroups import (  # (keygroups imports the kit, which imports this)
            DEFAULT_KEY_GROUPS,
            check_count,
            check_key_groups,
        )

        mode = RunMode(mode)
        if key_groups is not None:
            check_count(key_groups, "max_partitions")
        check_count(partitions, "partitions")
        wanted = {"format": FORMAT, "definition": definition, "partitions": partitions, "mode": mode.value,
                  "key_groups": DEFAULT_KEY_GROUPS if key_groups is None else key_groups}
        found = self._read_json("streamjoin.json")
        if found is None:
            check_key_groups(wanted["key_groups"], partitions)   # before anything is written
            if self._create_json("streamjoin.json", wanted):
                return
            found = self._read_json("streamjoin.json") or {}
        if found.get("format") != FORMAT:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} has format {found.get('format')}, this streamjoin writes "
                f"{FORMAT}; use a new checkpoint location"
            )
        if key_groups is not None and found.get("key_groups") not in (None, key_groups):
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} keeps its state in {found.get('key_groups')} key groups "
                f"(max_partitions), fixed when the join was first defined; this join asks for {key_groups}: "
                "leave max_partitions out or give the recorded value, or start from a new checkpoint location"
            )
        if found.get("definition") != json.loads(json.dumps(definition)):
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} belongs to another join definition:\n"
                f"  checkpoint: {json.dumps(found.get('definition'), sort_keys=True)}\n"
                f"  this join:  {json.dumps(definition, sort_keys=True)}\n"
                "use a new checkpoint location for a changed join"
            )
        self._check_mode(found, mode)

    def _check_mode(self, found: Mapping[str, Any], mode: RunMode) -> None:
        recorded = found.get("mode")
        if recorded is None:   # written before modes were recorded: a bound query means streaming
            recorded = RunMode.STREAMING.value if self.bound_query() is not None else None
        if recorded is None or recorded == mode.value:
            return
        if mode is RunMode.BATCH:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} holds the state of a streaming query; a batch run would "
                "replace that state with its own and the query could not continue. Give the batch "
                "run its own checkpoint location, or none (a batch run needs no checkpoint)"
            )
        raise CheckpointMismatchError(
            f"checkpoint {self.uri} was written by a batch run, whose state ends with every window "
            "closed; a streaming query cannot continue from it. Use a new checkpoint location for "
            "the streaming query"
        )

    def bound_query(self) -> str | None:
        """The id of the streaming query this checkpoint belongs to; None if none has run."""
        found = self._read_json("query.json")
        if found is not None:
            return found.get("query_id")
        legacy = self._read_json("streamjoin.json") or {}   # where older versions kept it
        return legacy.get("query_id")

    def check_query(self, query_id: str | None) -> None:
        """Refuse a checkpoint bound to another streaming query; bind it to ``query_id`` if free.

        ``query_id`` None (a batch task) is refused on a checkpoint bound to a query. Binding is
        create-if-absent: of queries starting at once, exactly one binds it, the others are refused.
        """
        if query_id is not None and _BOUND.get(self.uri) == query_id:
            return   # a binding is never rewritten: checked once per process
        bound = self.bound_query()
        if bound is None and query_id is not None:
            if self._create_json("query.json", {"query_id": query_id}):
                _BOUND[self.uri] = query_id
                return
            bound = self.bound_query()
        if bound is not None and bound == query_id:
            _BOUND[self.uri] = query_id
        if bound is None or bound == query_id:
            return
        if query_id is None:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} belongs to streaming query {bound}; a batch run must not "
                "write it. Give the batch run its own checkpoint location, or none"
            )
        raise CheckpointMismatchError(
            f"checkpoint {self.uri} belongs to streaming query {bound}, not {query_id}; each "
            "query needs its own join checkpoint (restart a query from its own Spark checkpoint "
            "to keep its id)"
        )

    def claim_flush(self, owner: str) -> str:
        """Record ``owner`` (a streaming query's flush source, see :mod:`streamjoin.spark.flush`)
        as the one writing this checkpoint unless another is recorded; the owner recorded.
        Create-if-absent, like ``query.json``: of two sources claiming at once exactly one wins."""
        found = self._read_json("flush.json")
        if found is None:
            if self._create_json("flush.json", {"owner": owner}):
                return owner
            found = self._read_json("flush.json") or {}
        return str(found.get("owner"))

    # -- paths ----------------------------------------------------------------------------------

    def changelog_uri(self, partition: int) -> str:
        """The URI of partition ``partition``'s changelog."""
        return self._uri(f"state/p={partition}")

    # -- commit records: progress (global event time) and metrics, one file per partition and version

    def write_commit(self, version: int, partition: int, partitions: int,
                     max_times: tuple[int | None, ...], metrics: Mapping[str, Any]) -> None:
        """Record that ``partition`` (of ``partitions``) finished ``version``: the global event-time
        progress including its rows (in the name, so one listing reads every partition's) and its
        metrics. Written again for the same version (a task or batch executed again), it replaces
        the record there; a record of the partition under other values is removed after it."""
        directory = f"{COMMITS}/v={version}"
        name = _commit_name(partition, partitions, max_times)
        self._write_json(f"{directory}/{name}", {
            "version": version, "partition": partition, "partitions": partitions,
            "max_times": list(max_times), "metrics": dict(metrics)})
        stale = [i.path for i in self._files(directory)
                 if i.is_file and i.base_name != name and _commit_partition(i.base_name) == partition]
        for path in stale:
            self.fs.delete_file(path)

    def write_progress_base(self, version: int, max_times: tuple[int | None, ...]) -> None:
        """Record a base for the watermark inputs of the versions after ``version``: they start
        from the maximum of it and that version's commit records. For a rewrite of the state
        between versions (rescaling) that does not keep the commit records of ``version``; the
        base alone makes the version's records complete. Partition ``-1`` in :meth:`commit_records`."""
        times = "_".join("x" if t is None else str(int(t)) for t in max_times)
        self._write_json(f"{COMMITS}/v={version}/base.t={times}.json", {"base": True, "max_times": list(max_times)})

    def commit_records(self, version: int) -> list[CommitRecord]:
        """Every partition's record of ``version`` (one listing, no reads), by partition; raises
        :class:`CheckpointDamagedError` for a file there that is not a commit record."""
        found = []
        for info in self._files(f"{COMMITS}/v={version}"):
            if not info.is_file:
                continue
            record = _parse_commit(version, info.base_name)
            if record is None:
                raise CheckpointDamagedError(
                    f"checkpoint record {self._uri(self._rel(info.path))} is damaged (not the name of a "
                    "commit record); restore it from a copy of the checkpoint, or start the join from a "
                    "new checkpoint location", path=self._uri(self._rel(info.path)))
            found.append(record)
        return sorted(found, key=lambda r: r.partition)

    def watermark_inputs(self, before: int, n_inputs: int) -> tuple[int | None, ...]:
        """The largest event time per input over every partition's rows in versions before ``before``.

        Read from the commit records of the newest version before ``before`` (each carries the
        global progress up to its version): one listing when that version is ``before - 1``, three
        at most otherwise. Raises :class:`CheckpointDamagedError` when a partition's record of that
        version is missing or damaged: the watermark would be another one on another partition.
        """
        records = self.commit_records(before - 1)
        if not records:
            older = [v for v in self.metrics_versions() if v < before - 1]
            records = self.commit_records(older[-1]) if older else []
        if not records:
            return (None,) * n_inputs
        self._check_complete(records)
        return _combine(records, n_inputs)

    def newest_progress(self, n_inputs: int) -> tuple[int, tuple[int | None, ...]] | None:
        """``(version, progress)`` of the newest version every partition has committed (a version
        being written is skipped); None before the first. For the driver (the flush source)."""
        for version in reversed(self.metrics_versions()):
            records = self.commit_records(version)
            if records and _complete(records):
                return version, _combine(records, n_inputs)
        return None

    def read_progress(self, partition: int, before: int) -> tuple[int | None, ...] | None:
        """The global progress ``partition`` recorded in its newest version ``< before``; None if
        it has none (read from names only: one listing of the versions, one per version tried)."""
        for version in reversed([v for v in self.metrics_versions() if v < before]):
            for record in self.commit_records(version):
                if record.partition == partition:
                    return record.max_times
        return None

    def _check_complete(self, records: list[CommitRecord]) -> None:
        if _complete(records):
            return
        version = records[0].version
        parts = [r for r in records if r.partition >= 0]
        counts = sorted({r.partitions for r in parts})
        wanted = set(range(max(counts)))
        missing = sorted(wanted - {r.partition for r in parts})
        raise CheckpointDamagedError(
            f"checkpoint {self.uri}: the commit records of version {version} "
            f"({self._uri(f'{COMMITS}/v={version}')}) are "
            + (f"missing for partitions {missing}" if missing else f"of different partition counts {counts}")
            + "; every partition records each version it commits, so the watermark would differ "
            "between partitions. Restore the directory from a copy of the checkpoint, or start the "
            "join from a new checkpoint location", path=self._uri(f"{COMMITS}/v={version}"))

    # -- per-version outputs --------------------------------------------------------------------

    def write_set_aside(self, input_name: str, version: int, partition: int, table: pa.Table) -> None:
        self._write(f"set_aside/{input_name}/v={version}/p={partition}.parquet",
                    lambda sink: pq.write_table(table, sink))

    def write_set_aside_schema(self, input_name: str, schema: pa.Schema) -> None:
        """Record the columns of ``input_name``'s set-aside rows as an empty Parquet file
        (``set_aside/<input>/schema.parquet``), so that a reader finding no rows still gets them."""
        rel = f"set_aside/{input_name}/schema.parquet"
        if self.fs.get_file_info(self._path(rel)).type == pafs.FileType.NotFound:
            self._write(rel, lambda sink: pq.write_table(schema.empty_table(), sink))

    def set_aside_uri(self, input_name: str) -> str | None:
        """URI of input's set-aside rows (Parquet, partitioned by v and p); None if there are none."""
        info = self.fs.get_file_info(self._path(f"set_aside/{input_name}"))
        return None if info.type == pafs.FileType.NotFound else self._uri(f"set_aside/{input_name}")

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every retained metrics record (from the commit records), ordered by (version, partition).
        Raises :class:`CheckpointDamagedError` for a record that cannot be read."""
        records = []
        for info in self._files(COMMITS, recursive=True):
            if info.is_file and info.path.endswith(".json") and not info.base_name.startswith("base."):
                data = self._read_json(self._rel(info.path)) or {}
                if not isinstance(data.get("metrics"), dict):
                    raise CheckpointDamagedError(
                        f"checkpoint record {self._uri(self._rel(info.path))} is damaged (no metrics); "
                        "restore it from a copy of the checkpoint", path=self._uri(self._rel(info.path)))
                records.append(data["metrics"])
        return sorted(records, key=lambda r: (r.get("version", 0), r.get("partition", 0)))

    def metrics_versions(self) -> list[int]:
        """The versions that have commit records, ascending."""
        return sorted(v for v in (_version_of(i.path) for i in self._files(COMMITS)
                                  if i.type == pafs.FileType.Directory) if v >= 0)

    def newest_metrics_version(self) -> int | None:
        """The newest version with a commit record (the last one committed); None before the first."""
        versions = self.metrics_versions()
        return versions[-1] if versions else None

    def prune_commits(self, keep_from: int) -> None:
        """Delete the commit records of versions older than ``keep_from`` (whole version
        directories; run by one partition, as no task of those versions runs any more). The
        newest version before ``keep_from`` is kept: it carries the progress of all before it."""
        old = [v for v in self.metrics_versions() if v < keep_from]
        for version in old[:-1]:
            self.fs.delete_dir(self._path(f"{COMMITS}/v={version}"))

    # -- initial rows (read by the first version only) ------------------------------------------

    def write_initial(self, input_name: str, partition: int, table: pa.Table) -> None:
        """Store rows that partition ``partition``'s first version adds to input ``input_name``."""
        def produce(sink: Any) -> None:
            with ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)

        self._write(f"initial/{input_name}/p={partition}.arrow", produce)

    def read_initial(self, input_name: str, partition: int) -> pa.Table | None:
        """The initial rows of ``input_name`` for ``partition``; None if there are none.

        Raises :class:`CheckpointMismatchError` if initial rows were started but never completed
        (the job that writes them failed): the first version must not run on part of them.
        """
        if self.initial_done() is None:
            info = self.fs.get_file_info(self._path("initial"))
            if info.type != pafs.FileType.NotFound:
                raise CheckpointMismatchError(
                    f"checkpoint {self.uri} holds initial rows that were never completed (the bootstrap "
                    "job failed); define the join again to write them, or use a new checkpoint location"
                )
            return None
        path = self._path(f"initial/{input_name}/p={partition}.arrow")
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.fs.open_input_file(path) as source:
            return ipc.open_file(source).read_all()

    def mark_initial_done(self, counts: Mapping[str, int]) -> None:
        """Mark the initial rows complete, with how many each input has."""
        self._write_json("initial/done.json", {"rows": dict(counts)})

    def initial_done(self) -> dict[str, int] | None:
        """Row counts per input of completed initial rows; None if none were completed."""
        found = self._read_json("initial/done.json")
        return None if found is None else dict(found["rows"])

    def initial_used(self, partition: int) -> int | None:
        """The version in which ``partition`` took its initial rows; None if it has not."""
        found = self._read_json(f"initial/used/p={partition}.json")
        return None if found is None else int(found["version"])

    def mark_initial_used(self, partition: int, version: int) -> None:
        self._write_json(f"initial/used/p={partition}.json", {"version": version})

    def has_state(self) -> bool:
        """Whether any partition has committed a version (the first version has run)."""
        selector = pafs.FileSelector(self._path("state"), recursive=True, allow_not_found=True)
        return any(info.is_file for info in self.fs.get_file_info(selector))

    def committed_before(self, version: int) -> list[str]:
        """What in this checkpoint shows that the join committed a version before ``version``
        (a changelog file, commit records, used initial rows), as short descriptions;
        empty when nothing does (a new join, or one whose first version is ``version``)."""
        found: list[str] = []
        for info in self._files("state", recursive=True):
            parsed = parse_name(posixpath.basename(info.path), info.size or 0) if info.is_file else None
            # a first version k > 0 begins its log with an empty snapshot at k - 1: not evidence
            base = version - 1 if parsed is not None and parsed.kind is Kind.SNAPSHOT else version
            if parsed is not None and parsed.version < base:
                found.append(f"changelog file {self._rel(info.path)}")
                break
        for info in self._files(COMMITS):
            if info.type == pafs.FileType.Directory and 0 <= _version_of(info.path) < version:
                found.append(f"commit records {self._rel(info.path)}")
                break
        for info in self._files("initial/used"):
            used = self._read_json(self._rel(info.path)) if info.is_file else None
            if used is not None and int(used.get("version", version)) < version:
                found.append(f"initial rows taken in version {used['version']} ({self._rel(info.path)})")
                break
        return found

    # -- partitioning epochs (streamjoin.runtime.rescale) ---------------------------------------

    def key_groups(self) -> int:
        """The number of key groups state is kept by (recorded by :meth:`bind`)."""
        found = self._read_json("streamjoin.json") or {}
        if not isinstance(found.get("key_groups"), int):
            raise CheckpointDamagedError(
                f"checkpoint {self.uri}: streamjoin.json records no key groups; restore it from a copy of "
                "the checkpoint, or start the join from a new checkpoint location",
                path=self._uri("streamjoin.json"))
        return found["key_groups"]

    def read_record(self, rel: str) -> dict[str, Any] | None:
        """The JSON record at ``rel`` (relative to the checkpoint); None if there is none."""
        return self._read_json(rel)

    def create_record(self, rel: str, data: Mapping[str, Any]) -> bool:
        """Write the JSON record at ``rel`` unless one exists; True if this call wrote it."""
        return self._create_json(rel, data)

    def record_names(self, rel: str) -> list[str]:
        """The names of the files and folders directly under ``rel`` (none if it is missing)."""
        return [posixpath.basename(i.path) for i in self._files(rel)]

    def modified(self, rel: str) -> float:
        """When ``rel`` was last modified, in seconds since the epoch (0 if unknown)."""
        info = self.fs.get_file_info(self._path(rel))
        return 0.0 if info.mtime is None else info.mtime.timestamp()

    def location(self, rel: str) -> str:
        """The URI of ``rel`` under the checkpoint."""
        return self._uri(rel)

    # -- helpers --------------------------------------------------------------------------------

    def _uri(self, rel: str) -> str:
        base = self.uri.rstrip("/")
        return f"{base}/{rel}"

    def _path(self, rel: str) -> str:
        return posixpath.join(self.root, rel)

    def _rel(self, path: str) -> str:
        return posixpath.relpath(path, self.root)

    def _files(self, rel: str, recursive: bool = False) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self._path(rel), recursive=recursive, allow_not_found=True)
        return [i for i in self.fs.get_file_info(selector) if not posixpath.basename(i.path).startswith(".")]

    def _list_versions(self, directory: str) -> list[int]:
        selector = pafs.FileSelector(directory, allow_not_found=True)
        out = []
        for info in self.fs.get_file_info(selector):
            name = posixpath.basename(info.path)
            if info.is_file and name.startswith("v=") and name.endswith(".json"):
                out.append(int(name[2:-5]))
        return out

    def _storage(self, rel: str) -> Storage:
        return open_storage(posixpath.dirname(self._path(rel)), self.fs)

    def _read_json(self, rel: str) -> dict[str, Any] | None:
        """The record at ``rel``; None if there is none. Raises :class:`CheckpointDamagedError`
        for one that is empty or not a JSON object."""
        path = self._path(rel)
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        try:
            with self.fs.open_input_stream(path) as fh:
                data = json.loads(fh.read())
        except FileNotFoundError:
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            data = exc
        if not isinstance(data, dict):
            raise CheckpointDamagedError(
                f"checkpoint record {self._uri(rel)} is damaged (empty or not a JSON object: {data}); "
                "restore it from a copy of the checkpoint, or start the join from a new checkpoint "
                "location", path=self._uri(rel)) from (data if isinstance(data, Exception) else None)
        return data

    def _write_json(self, rel: str, data: Mapping[str, Any]) -> None:
        payload = json.dumps(data, sort_keys=True).encode()
        self._write(rel, lambda sink: sink.write(payload))

    def _create_json(self, rel: str, data: Mapping[str, Any]) -> bool:
        """Write the record at ``rel`` unless one exists; True if this call wrote it."""
        name = posixpath.basename(rel)
        return self._storage(rel).write_if_absent(name, json.dumps(data, sort_keys=True).encode())

    def _write(self, rel: str, produce: Callable[[Any], object]) -> None:
        """Durably and atomically write ``produce``'s bytes at ``rel`` (replacing a file there)."""
        name = posixpath.basename(rel)
        self._storage(rel).write_atomic(name, produce, lambda _crc: name)


def _version_of(path: str) -> int:
    """``v`` of a path ending in ``v=<v>`` or ``v=<v>.json`` (-1 for another name)."""
    name = posixpath.basename(path)
    digits = name[2:].removesuffix(".json")
    return int(digits) if name.startswith("v=") and digits.isdigit() else -1


def _partition_of(path: str) -> int | None:
    """``p`` of a ``.../p=<p>`` path; None for any other name."""
    name = posixpath.basename(path)
    return int(name[2:]) if name.startswith("p=") and name[2:].isdigit() else None


def _commit_name(partition: int, partitions: int, max_times: tuple[int | None, ...]) -> str:
    """``p=<p>.of=<n>.t=<t0>_<t1>.json``, an absent time written ``x``."""
    times = "_".join("x" if t is None else str(int(t)) for t in max_times)
    return f"p={partition}.of={partitions}.t={times}.json"


def _commit_partition(name: str) -> int | None:
    head = name.split(".", 1)[0]
    return int(head[2:]) if head.startswith("p=") and head[2:].isdigit() else None


def _parse_commit(version: int, name: str) -> CommitRecord | None:
    """The record a commit record's file name describes (a base: partition -1); None for any other."""
    parts = name.removesuffix(".json").split(".")
    if len(parts) == 2 and parts[0] == "base" and parts[1].startswith("t=") and name.endswith(".json"):
        parts = ["p=-1", "of=0", parts[1]]
    if not name.endswith(".json") or len(parts) != 3 or not parts[0].startswith("p=") \
            or not parts[1].startswith("of=") or not parts[2].startswith("t="):
        return None
    try:
        times = tuple(None if t == "x" else int(t) for t in parts[2][2:].split("_")) if parts[2] != "t=" else ()
        partition = -1 if parts[0] == "p=-1" else int(parts[0][2:]) if parts[0][2:].isdigit() else None
        if partition is None:
            return None
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
    result: list[int | None] = [None] * n_inputs
    for record in records:
        for i, value in enumerate(record.max_times[:n_inputs]):
            if value is not None and (result[i] is None or value > result[i]):
                result[i] = value
    return tuple(result)
