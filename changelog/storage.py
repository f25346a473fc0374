"""Where changelog files live: a local directory or any ``pyarrow.fs`` filesystem.

A :class:`Storage` lists, reads, deletes and atomically writes whole files in one directory:

* ``write_atomic`` streams a file to a temporary name (``.tmp-...``, which listing skips), computes
  the CRC-32 of every byte on the way, makes it durable, and only then moves it to the final name
  that ``name_for(crc)`` returns. A reader therefore sees a whole file under its final name or no
  file at all; a crash leaves at most a temporary file behind.
* On a local disk, durability is ``fsync`` of the file and then of the directory after the rename
  (and after deletes), and reads are memory maps (zero copy, the page cache holds the bytes).
* On other filesystems (object stores), the file is written with ``open_output_stream`` and moved
  with ``FileSystem.move``; an object store makes an object visible only once it is complete.
"""

from __future__ import annotations

import itertools
import os
import posixpath
import zlib
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable

import pyarrow as pa
import pyarrow.fs as pafs

__all__ = ["Storage", "LocalStorage", "ArrowStorage", "open_storage", "FileInfo", "TEMP_PREFIX"]

#: Names starting with this are files being written (or left behind by a crash).
TEMP_PREFIX = ".tmp-"

_COUNTER = itertools.count()


@dataclass(frozen=True)
class FileInfo:
    """A file in the directory: its name and size in bytes."""

    name: str
    size: int


class CrcWriter:
    """A write-only file object that forwards to ``sink`` and keeps the CRC-32 and size so far."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.crc = zlib.crc32(view, self.crc)
        self.size += view.nbytes
        self._sink.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class Storage(ABC):
    """One directory of whole files (see module docstring)."""

    uri: str

    @abstractmethod
    def list(self) -> list[FileInfo]:
        """Every file directly in the directory (an absent directory is empty)."""

    @abstractmethod
    def read(self, name: str) -> pa.Buffer:
        """The whole content of ``name``. Raises FileNotFoundError when it is gone."""

    @abstractmethod
    def delete(self, names: list[str]) -> None:
        """Remove ``names`` in the given order (missing ones are fine), durably."""

    @abstractmethod
    def _open_temp(self, temp: str) -> Any:
        """A writable binary file at the temporary name ``temp``."""

    @abstractmethod
    def _publish(self, handle: Any, temp: str, final: str) -> None:
        """Close ``handle`` durably and move ``temp`` to ``final`` (replacing it)."""

    def write_atomic(
        self, tag: str, produce: Callable[[BinaryIO], None], name_for: Callable[[int], str]
    ) -> FileInfo:
        """Write ``produce``'s bytes to a temporary file, then move it to ``name_for(crc32)``.

        ``tag`` goes into the temporary name (so a leftover can be traced to what wrote it).
        If ``produce`` raises, the temporary file is removed and nothing is published.
        """
        temp = f"{TEMP_PREFIX}{tag}-{os.getpid()}-{next(_COUNTER)}"
        handle = self._open_temp(temp)
        writer = CrcWriter(handle)
        try:
            produce(writer)  # type: ignore[arg-type]
            final = name_for(writer.crc)
            self._publish(handle, temp, final)
        except BaseException:
            _close_quietly(handle)
            self.delete([temp])
            raise
        return FileInfo(final, writer.size)


class LocalStorage(Storage):
    """A directory on the local disk, with fsync for durability and memory-mapped reads."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.uri = self.root

    def __repr__(self) -> str:
        return f"LocalStorage({self.root!r})"

    def list(self) -> list[FileInfo]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        return [FileInfo(e.name, e.stat().st_size) for e in entries if e.is_file()]

    def read(self, name: str) -> pa.Buffer:
        path = os.path.join(self.root, name)
        if os.path.getsize(path) == 0:
            return pa.py_buffer(b"")
        with pa.memory_map(path, "r") as mapped:
            return mapped.read_buffer()

    def delete(self, names: list[str]) -> None:
        removed = False
        for name in names:
            try:
                os.remove(os.path.join(self.root, name))
                removed = True
            except FileNotFoundError:
                pass
        if removed:
            _fsync_dir(self.root)

    def _open_temp(self, temp: str) -> BinaryIO:
        os.makedirs(self.root, exist_ok=True)
        return open(os.path.join(self.root, temp), "wb")

    def _publish(self, handle: BinaryIO, temp: str, final: str) -> None:
        handle.flush()
        os.fsync(handle.fileno())
        handle.close()
        os.replace(os.path.join(self.root, temp), os.path.join(self.root, final))
        _fsync_dir(self.root)


class ArrowStorage(Storage):
    """A directory on any ``pyarrow.fs`` filesystem (S3, GCS, HDFS, ...)."""

    def __init__(self, fs: pafs.FileSystem, root: str, uri: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        self.uri = uri

    def __repr__(self) -> str:
        return f"ArrowStorage({self.uri!r})"

    def list(self) -> list[FileInfo]:
        selector = pafs.FileSelector(self.root, allow_not_found=True)
        return [
            FileInfo(posixpath.basename(info.path), info.size or 0)
            for info in self.fs.get_file_info(selector)
            if info.type == pafs.FileType.File
        ]

    def read(self, name: str) -> pa.Buffer:
        path = posixpath.join(self.root, name)
        try:
            with self.fs.open_input_file(path) as fh:
                return fh.read_buffer()
        except OSError as exc:
            if self.fs.get_file_info(path).type == pafs.FileType.NotFound:
                raise FileNotFoundError(path) from exc
            raise

    def delete(self, names: list[str]) -> None:
        for name in names:
            path = posixpath.join(self.root, name)
            if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                self.fs.delete_file(path)

    def _open_temp(self, temp: str) -> Any:
        self.fs.create_dir(self.root, recursive=True)
        return self.fs.open_output_stream(posixpath.join(self.root, temp))

    def _publish(self, handle: Any, temp: str, final: str) -> None:
        handle.close()
        self.fs.move(posixpath.join(self.root, temp), posixpath.join(self.root, final))


def open_storage(uri: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None) -> Storage:
    """The storage for ``uri``: a local path, a ``file://`` URI, or any URI pyarrow knows.

    With ``filesystem`` given, ``uri`` is a path inside it.
    """
    uri = os.fspath(uri)
    if filesystem is None:
        if "://" not in uri:
            return LocalStorage(uri)
        filesystem, root = pafs.FileSystem.from_uri(uri)
    else:
        root = uri
    if isinstance(filesystem, pafs.LocalFileSystem):
        return LocalStorage(root)
    return ArrowStorage(filesystem, root, uri)


def _fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _close_quietly(handle: Any) -> None:
    try:
        handle.close()
    except Exception:  # noqa: BLE001 - already failing; the original error matters
        pass
