"""One operator's checkpoint: its binding, its changelogs, and the per-version records beside them.

Layout under the checkpoint URI (a local path or any ``pyarrow.fs`` URI)::

    streamjoin.json                   what this checkpoint belongs to (definition, partitions, query)
    state/p=<p>/                      partition p's changelog (deltas and snapshots)
    progress/p=<p>/v=<v>.json         partition p's largest event time per input, up to version v
    set_aside/<input>/v=<v>/p=<p>.parquet   rows not processed (late, dead letters), with reasons
    metrics/v=<v>/p=<p>.json          what partition p did in version v
    initial/<input>/p=<p>.arrow       rows given to the join's first version (e.g. a bootstrap
                                      snapshot), routed to partition p; ``initial/done.json``
                                      marks the set complete, ``initial/used/p=<p>.json``
                                      the version that took them

Every file is written to a temporary name and moved into place, so a reader sees a whole file or
none, and writing one again (a task or batch executed again) replaces it with identical content.
"""

from __future__ import annotations

import itertools
import json
import os
import posixpath
from typing import Any, Mapping

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from streamjoin.errors import CheckpointMismatchError

__all__ = ["Checkpoint", "FORMAT"]

FORMAT = 1


class Checkpoint:
    """Reads and writes one operator's checkpoint files (see module docstring)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        self.fs, self.root = pafs.FileSystem.from_uri(_absolute(uri))

    def __repr__(self) -> str:
        return f"Checkpoint({self.uri!r})"

    # -- binding --------------------------------------------------------------------------------

    def bind(self, definition: Mapping[str, Any], partitions: int) -> None:
        """Record what this checkpoint belongs to, or refuse if it belongs to something else."""
        wanted = {"format": FORMAT, "definition": definition, "partitions": partitions}
        found = self._read_json("streamjoin.json")
        if found is None:
            self._write_json("streamjoin.json", {**wanted, "query_id": None})
            return
        if found.get("format") != FORMAT:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} has format {found.get('format')}, this streamjoin writes "
                f"{FORMAT}; use a new checkpoint location"
            )
        if found.get("partitions") != partitions:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} was written with partitions={found.get('partitions')}, "
                f"this join asks for partitions={partitions}; state is partitioned by key, so keep "
                "the partition count of a checkpoint or start from a new checkpoint location"
            )
        if found.get("definition") != json.loads(json.dumps(definition)):
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} belongs to another join definition:\n"
                f"  checkpoint: {json.dumps(found.get('definition'), sort_keys=True)}\n"
                f"  this join:  {json.dumps(definition, sort_keys=True)}\n"
                "use a new checkpoint location for a changed join"
            )

    def check_query(self, query_id: str | None) -> None:
        """Refuse a checkpoint bound to another streaming query; bind it to ``query_id`` if free."""
        if query_id is None:
            return
        found = self._read_json("streamjoin.json") or {}
        bound = found.get("query_id")
        if bound is None:
            self._write_json("streamjoin.json", {**found, "query_id": query_id})
        elif bound != query_id:
            raise CheckpointMismatchError(
                f"checkpoint {self.uri} belongs to streaming query {bound}, not {query_id}; each "
                "query needs its own join checkpoint (restart a query from its own Spark checkpoint "
                "to keep its id)"
            )

    # -- paths ----------------------------------------------------------------------------------

    def changelog_uri(self, partition: int) -> str:
        """The URI of partition ``partition``'s changelog."""
        return self._uri(f"state/p={partition}")

    # -- progress (global event time) -----------------------------------------------------------

    def write_progress(self, partition: int, version: int, max_times: tuple[int | None, ...]) -> None:
        self._write_json(f"progress/p={partition}/v={version}.json", {"max_times": list(max_times)})

    def read_progress(self, partition: int, before: int) -> tuple[int | None, ...] | None:
        """Partition's cumulative max event times as of the latest version ``< before``."""
        directory = self._path(f"progress/p={partition}")
        versions = [v for v in self._list_versions(directory) if v < before]
        if not versions:
            return None
        data = self._read_json(f"progress/p={partition}/v={max(versions)}.json")
        return tuple(data["max_times"]) if data else None

    def prune_progress(self, partition: int, keep_from: int) -> None:
        """Delete partition's progress records older than ``keep_from`` (keeping the newest one)."""
        directory = self._path(f"progress/p={partition}")
        old = sorted(v for v in self._list_versions(directory) if v < keep_from)
        for version in old[:-1]:
            self.fs.delete_file(posixpath.join(directory, f"v={version}.json"))

    # -- per-version outputs --------------------------------------------------------------------

    def write_set_aside(self, input_name: str, version: int, partition: int, table: pa.Table) -> None:
        rel = f"set_aside/{input_name}/v={version}/p={partition}.parquet"
        tmp = self._path(f"{rel}.{_tmp_suffix()}")
        self.fs.create_dir(posixpath.dirname(tmp), recursive=True)
        pq.write_table(table, tmp, filesystem=self.fs)
        self.fs.move(tmp, self._path(rel))

    def set_aside_uri(self, input_name: str) -> str | None:
        """URI of input's set-aside rows (Parquet, partitioned by v and p); None if there are none."""
        info = self.fs.get_file_info(self._path(f"set_aside/{input_name}"))
        return None if info.type == pafs.FileType.NotFound else self._uri(f"set_aside/{input_name}")

    def write_metrics(self, version: int, partition: int, metrics: Mapping[str, Any]) -> None:
        self._write_json(f"metrics/v={version}/p={partition}.json", dict(metrics))

    def read_metrics(self) -> list[dict[str, Any]]:
        """Every metrics record, ordered by (version, partition)."""
        records = []
        selector = pafs.FileSelector(self._path("metrics"), recursive=True, allow_not_found=True)
        for info in self.fs.get_file_info(selector):
            if info.is_file and info.path.endswith(".json"):
                with self.fs.open_input_stream(info.path) as fh:
                    records.append(json.loads(fh.read()))
        return sorted(records, key=lambda r: (r.get("version", 0), r.get("partition", 0)))

    # -- initial rows (read by the first version only) ------------------------------------------

    def write_initial(self, input_name: str, partition: int, table: pa.Table) -> None:
        """Store rows that partition ``partition``'s first version adds to input ``input_name``."""
        path = self._path(f"initial/{input_name}/p={partition}.arrow")
        tmp = f"{path}.{_tmp_suffix()}"
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        with self.fs.open_output_stream(tmp) as sink, ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        self.fs.move(tmp, path)

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

    # -- helpers --------------------------------------------------------------------------------

    def _uri(self, rel: str) -> str:
        base = self.uri.rstrip("/")
        return f"{base}/{rel}"

    def _path(self, rel: str) -> str:
        return posixpath.join(self.root, rel)

    def _list_versions(self, directory: str) -> list[int]:
        selector = pafs.FileSelector(directory, allow_not_found=True)
        out = []
        for info in self.fs.get_file_info(selector):
            name = posixpath.basename(info.path)
            if info.is_file and name.startswith("v=") and name.endswith(".json"):
                out.append(int(name[2:-5]))
        return out

    def _read_json(self, rel: str) -> dict[str, Any] | None:
        path = self._path(rel)
        if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
            return None
        with self.fs.open_input_stream(path) as fh:
            return json.loads(fh.read())

    def _write_json(self, rel: str, data: Mapping[str, Any]) -> None:
        path = self._path(rel)
        tmp = f"{path}.{_tmp_suffix()}"
        self.fs.create_dir(posixpath.dirname(path), recursive=True)
        with self.fs.open_output_stream(tmp) as fh:
            fh.write(json.dumps(data, sort_keys=True).encode())
        self.fs.move(tmp, path)


_COUNTER = itertools.count()


def _tmp_suffix() -> str:
    """A temporary-file suffix unique to this process and call (no randomness needed)."""
    return f"{os.getpid()}-{next(_COUNTER)}.tmp"


def _absolute(uri: str) -> str:
    return uri if "://" in uri else os.path.abspath(uri)
