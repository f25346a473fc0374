"""The file primitives of a checkpoint: its location, and JSON records and listings under it.

Every file is written to a temporary name, made durable (``fsync`` on a local disk) and moved into
place, so a reader sees a whole file or none, and writing one again (a task or batch executed
again) replaces it with identical content. A record can also be created only if absent
(atomically on a local disk; see :meth:`streamjoin.changelog.storage.Storage.write_if_absent`), so
of two runs creating it at once exactly one wins. A record that cannot be read raises
:class:`CheckpointDamagedError` naming the file.
"""

from __future__ import annotations

import json
import posixpath
from typing import Any, BinaryIO, Callable, Mapping

import pyarrow.fs as pafs

from streamjoin.changelog.storage import Storage, filesystem_for, open_storage, resolve_uri
from streamjoin.errors import CheckpointDamagedError, JoinDefinitionError

__all__ = ["CheckpointFiles", "resolve_location", "version_of"]


def resolve_location(uri: str) -> str:
    """``uri`` in canonical form (:func:`streamjoin.changelog.storage.resolve_uri`); raises
    :class:`JoinDefinitionError` for a scheme that cannot be opened."""
    try:
        return resolve_uri(uri)
    except (ValueError, TypeError) as exc:
        raise JoinDefinitionError(f"checkpoint={uri!r}: {exc}") from exc


class CheckpointFiles:
    """Files under one checkpoint location, named by their path relative to it (``rel``)."""

    def __init__(self, uri: str, fs: pafs.FileSystem | None = None, root: str | None = None) -> None:
        """``uri`` is resolved (:func:`resolve_location`) unless ``fs`` and ``root`` are given."""
        if fs is None or root is None:
            uri = resolve_location(uri)
            fs, root = filesystem_for(uri)
        self.uri = uri
        self.fs = fs
        self.root = root

    def location(self, rel: str) -> str:
        """The URI of ``rel`` under the checkpoint."""
        return f"{self.uri.rstrip('/')}/{rel}"

    def path(self, rel: str) -> str:
        """The filesystem path of ``rel`` (for :attr:`fs`)."""
        return posixpath.join(self.root, rel)

    def rel(self, path: str) -> str:
        """A filesystem path as a path relative to the checkpoint."""
        return posixpath.relpath(path, self.root)

    def exists(self, rel: str) -> bool:
        """Whether a file or folder ``rel`` exists."""
        return self.fs.get_file_info(self.path(rel)).type != pafs.FileType.NotFound

    def entries(self, rel: str, recursive: bool = False) -> list[pafs.FileInfo]:
        """The files and folders under ``rel`` (none if it is missing), hidden ones left out."""
        selector = pafs.FileSelector(self.path(rel), recursive=recursive, allow_not_found=True)
        return [i for i in self.fs.get_file_info(selector) if not posixpath.basename(i.path).startswith(".")]

    def names(self, rel: str) -> list[str]:
        """The names of the files and folders directly under ``rel`` (none if it is missing)."""
        return [posixpath.basename(i.path) for i in self.entries(rel)]

    def modified(self, rel: str) -> float:
        """When ``rel`` was last modified, in seconds since the epoch (0 if unknown)."""
        info = self.fs.get_file_info(self.path(rel))
        return 0.0 if info.mtime is None else info.mtime.timestamp()

    def read_json(self, rel: str) -> dict[str, Any] | None:
        """The record at ``rel``; None if there is none. Raises :class:`CheckpointDamagedError`
        for one that is empty or not a JSON object."""
        data: Any
        try:
            with self.fs.open_input_stream(self.path(rel)) as fh:
                data = json.loads(fh.read())
        except (FileNotFoundError, NotADirectoryError):   # (the location is a file: no record in it)
            return None
        except (ValueError, UnicodeDecodeError) as exc:
            data = exc
        if not isinstance(data, dict):
            raise CheckpointDamagedError(
                f"checkpoint record {self.location(rel)} is damaged (empty or not a JSON object: {data}); "
                "restore it from a copy of the checkpoint, or start the join from a new checkpoint "
                "location", path=self.location(rel)) from (data if isinstance(data, Exception) else None)
        return data

    def write_json(self, rel: str, data: Mapping[str, Any]) -> None:
        """Durably and atomically write the record ``data`` at ``rel`` (replacing one there)."""
        payload = json.dumps(data, sort_keys=True).encode()

        def produce(sink: BinaryIO) -> None:
            sink.write(payload)

        self.write(rel, produce)

    def create_json(self, rel: str, data: Mapping[str, Any]) -> bool:
        """Write the record at ``rel`` unless one exists; True if this call wrote it."""
        name = posixpath.basename(rel)
        return self._storage(rel).write_if_absent(name, json.dumps(data, sort_keys=True).encode())

    def write(self, rel: str, produce: Callable[[BinaryIO], None]) -> None:
        """Durably and atomically write ``produce``'s bytes at ``rel`` (replacing a file there)."""
        name = posixpath.basename(rel)
        self._storage(rel).write_atomic(name, produce, lambda _crc: name)

    def delete_file(self, path: str) -> None:
        """Delete the file at filesystem path ``path``; one already gone (removed by another writer
        since it was listed) is fine."""
        try:
            self.fs.delete_file(path)
        except FileNotFoundError:
            pass

    def delete_dir(self, rel: str) -> None:
        """Delete the folder ``rel`` and everything under it; one already gone is fine."""
        try:
            self.fs.delete_dir(self.path(rel))
        except FileNotFoundError:
            pass

    def _storage(self, rel: str) -> Storage:
        return open_storage(posixpath.dirname(self.path(rel)), self.fs)


def version_of(path: str) -> int:
    """``v`` of a path ending in ``v=<v>`` or ``v=<v>.json`` (-1 for another name)."""
    name = posixpath.basename(path)
    digits = name[2:].removesuffix(".json")
    return int(digits) if name.startswith("v=") and digits.isdigit() else -1
