"""Where changelog files live: a local directory or any ``pyarrow.fs`` filesystem.

A :class:`Storage` lists, reads, deletes and atomically writes whole files in one directory:

* ``write_atomic`` streams a file to a temporary name (``.tmp-...``, which listing skips), computes
  the CRC-32 of every byte on the way, makes it durable, and only then moves it to the final name
  that ``name_for(crc)`` returns. A reader therefore sees a whole file under its final name or no
  file at all; a crash leaves at most a temporary file behind.
* On a local disk, durability is ``fsync`` of the file and then of the directory after the rename
  (and after deletes), and reads are memory maps (zero copy, the page cache holds the bytes).
* On other filesystems (object stores), the file is written with ``open_output_stream`` and moved
  with ``FileSystem.move``; an object store makes an object visible only once it is complete. A
  temporary name carries the pid and a random tag of its process, so writers on two hosts never
  share one; a temporary file removed before its move (by another writer of the same location)
  raises :class:`ChangelogConflictError` saying so, and a file deleted by another writer between
  the check and the delete counts as deleted.
* ``write_if_absent`` publishes a file only if none has that name, and says whether it did: on a
  local disk atomically (a hard link of the complete temporary file, which fails if the name
  exists), so of writers racing for a name exactly one wins; on other filesystems it is a check
  then a write (pyarrow offers no conditional write), so two writers starting within the same
  moment can both believe they won, and the later write is the one that stays.

Locations are written the way Spark users write them; :func:`resolve_uri` maps each to one
canonical form (see its table) that :func:`filesystem_for` opens with pyarrow, and refuses the
schemes pyarrow cannot open.
"""

from __future__ import annotations

import itertools
import os
import posixpath
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, BinaryIO, Callable, Sequence
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from streamjoin.changelog.errors import ChangelogConflictError
from streamjoin.statestore.crc_file import CrcWriter

__all__ = [
    "Storage", "LocalStorage", "ArrowStorage", "open_storage", "FileInfo", "TEMP_PREFIX", "resolve_uri",
    "filesystem_for", "URI_SCHEMES",
]

#: Names starting with this are files being written (or left behind by a crash).
TEMP_PREFIX = ".tmp-"

_COUNTER = itertools.count()
_WRITER: tuple[int, str] = (-1, "")


def _writer() -> str:
    """This process's part of temporary names: its pid and a random tag drawn once per process (a
    forked child draws its own), so that writers on two hosts, whose pids may be equal, never
    share a temporary object in one shared location."""
    global _WRITER
    if _WRITER[0] != os.getpid():
        _WRITER = (os.getpid(), f"{os.getpid()}{os.urandom(4).hex()}")
    return _WRITER[1]


@dataclass(frozen=True)
class FileInfo:
    """A file in the directory: its name and size in bytes."""

    name: str
    size: int


class Storage(ABC):
    """One directory of whole files (see module docstring)."""

    uri: str
    #: The directory, as the file system names it (a local path, or a path in ``fs``).
    root: str

    @abstractmethod
    def list(self) -> list[FileInfo]:
        """Every file directly in the directory (an absent directory is empty)."""

    @abstractmethod
    def read(self, name: str) -> pa.Buffer:
        """The whole content of ``name``. Raises FileNotFoundError when it is gone."""

    def local_path(self, name: str) -> str | None:
        """Where ``name`` is on this machine's disk, or None (it is elsewhere: object storage)."""
        return None

    @abstractmethod
    def delete(self, names: Sequence[str], sync: bool = True) -> None:
        """Remove ``names`` in the given order (missing ones are fine), durably (with ``sync``
        False on a local disk, durable only with the directory's next sync: a publish's)."""

    @abstractmethod
    def _open_temp(self, temp: str) -> Any:
        """A writable binary file at the temporary name ``temp``."""

    @abstractmethod
    def _publish(self, handle: Any, temp: str, final: str) -> None:
        """Close ``handle`` durably and move ``temp`` to ``final`` (replacing it)."""

    def write_atomic(
        self, tag: str, produce: Callable[[BinaryIO], object], name_for: Callable[[int], str]
    ) -> FileInfo:
        """Write ``produce``'s bytes to a temporary file, then move it to ``name_for(crc32)``.

        ``tag`` goes into the temporary name (so a leftover can be traced to what wrote it).
        If ``produce`` raises, the temporary file is removed and nothing is published.
        """
        temp = f"{TEMP_PREFIX}{tag}-{_writer()}-{next(_COUNTER)}"
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

    def write_if_absent(self, name: str, data: bytes) -> bool:
        """Publish ``data`` as ``name`` unless a file of that name exists; True if this call did.

        Atomic on a local disk (of racing writers exactly one returns True); a check then a write
        elsewhere (see module docstring).
        """
        if any(info.name == name for info in self.list()):
            return False
        temp = f"{TEMP_PREFIX}excl-{_writer()}-{next(_COUNTER)}"
        handle = self._open_temp(temp)
        try:
            handle.write(data)
            return self._publish_if_absent(handle, temp, name)
        except BaseException:
            _close_quietly(handle)
            raise
        finally:
            self.delete([temp])

    def _publish_if_absent(self, handle: Any, temp: str, final: str) -> bool:
        """Close ``handle`` durably and give ``temp`` the name ``final`` unless it exists."""
        if any(info.name == final for info in self.list()):
            return False
        self._publish(handle, temp, final)
        return True


class LocalStorage(Storage):
    """A directory on the local disk, with fsync for durability and memory-mapped reads.

    ``sync=False``: no fsync at all, for files that are only a cache of what durable storage
    holds (a process crash keeps them, a machine crash may lose or tear them; their readers
    verify them and fall back)."""

    def __init__(self, root: str, sync: bool = True) -> None:
        self.root = os.path.abspath(root)
        self.uri = self.root
        self.sync = sync

    def __repr__(self) -> str:
        return f"LocalStorage({self.root!r})"

    def list(self) -> list[FileInfo]:
        try:
            entries = list(os.scandir(self.root))
        except FileNotFoundError:
            return []
        found = []
        for entry in entries:
            try:  # a concurrent writer's temporary file may vanish between the listing and the stat
                if entry.is_file():
                    found.append(FileInfo(entry.name, entry.stat().st_size))
            except FileNotFoundError:
                continue
        return found

    def local_path(self, name: str) -> str | None:
        return os.path.join(self.root, name)

    def read(self, name: str) -> pa.Buffer:
        path = os.path.join(self.root, name)
        if os.path.getsize(path) == 0:
            return pa.py_buffer(b"")
        with pa.memory_map(path, "r") as mapped:
            return mapped.read_buffer()

    def delete(self, names: Sequence[str], sync: bool = True) -> None:
        removed = False
        for name in names:
            try:
                os.remove(os.path.join(self.root, name))
                removed = True
            except FileNotFoundError:
                pass
        if removed and sync and self.sync:
            _fsync_dir(self.root)

    def _open_temp(self, temp: str) -> BinaryIO:
        os.makedirs(self.root, exist_ok=True)
        return open(os.path.join(self.root, temp), "wb")

    def _publish(self, handle: BinaryIO, temp: str, final: str) -> None:
        handle.flush()
        if self.sync:
            os.fsync(handle.fileno())
        handle.close()
        os.replace(os.path.join(self.root, temp), os.path.join(self.root, final))
        if self.sync:
            _fsync_dir(self.root)

    def _publish_if_absent(self, handle: BinaryIO, temp: str, final: str) -> bool:
        handle.flush()
        if self.sync:
            os.fsync(handle.fileno())
        handle.close()
        try:
            os.link(os.path.join(self.root, temp), os.path.join(self.root, final))
        except FileExistsError:
            return False
        if self.sync:
            _fsync_dir(self.root)
        return True


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

    def delete(self, names: Sequence[str], sync: bool = True) -> None:
        for name in names:
            path = posixpath.join(self.root, name)
            if self.fs.get_file_info(path).type != pafs.FileType.NotFound:
                try:
                    self.fs.delete_file(path)
                except FileNotFoundError:   # deleted since the check (by another writer): as asked
                    pass

    def _open_temp(self, temp: str) -> Any:
        self.fs.create_dir(self.root, recursive=True)
        return self.fs.open_output_stream(posixpath.join(self.root, temp))

    def _publish(self, handle: Any, temp: str, final: str) -> None:
        handle.close()
        try:
            self.fs.move(posixpath.join(self.root, temp), posixpath.join(self.root, final))
        except FileNotFoundError as exc:
            raise ChangelogConflictError(
                f"{self.uri}: the file being written as {final} ({temp}) was removed before it could be moved "
                "into place: another process is writing this location at the same time. Two queries (or runs) "
                "must not share a checkpoint: stop the other one, or give each its own checkpoint location; "
                "then run this one again", files=[final]) from exc


#: Accepted schemes: what each becomes, and the ``pyarrow.fs`` class that opens it.
URI_SCHEMES: dict[str, tuple[str, str]] = {
    "file": ("", "LocalFileSystem"),        # file:/x, file:///x -> /x
    "dbfs": ("", "LocalFileSystem"),        # dbfs:/x -> /dbfs/x (the Databricks FUSE mount)
    "s3": ("s3", "S3FileSystem"),
    "s3a": ("s3", "S3FileSystem"),
    "s3n": ("s3", "S3FileSystem"),
    "gs": ("gs", "GcsFileSystem"),
    "gcs": ("gs", "GcsFileSystem"),
    "hdfs": ("hdfs", "HadoopFileSystem"),
    "abfs": ("abfs", "AzureFileSystem"),
    "abfss": ("abfss", "AzureFileSystem"),
    "mock": ("mock", "LocalFileSystem"),    # pyarrow's in-memory filesystem, for tests
}


def resolve_uri(uri: str | os.PathLike[str]) -> str:
    """The canonical form of a location: an absolute local path, or a URI pyarrow opens.

    A path without a scheme becomes absolute (against this process's working directory: resolve
    once, where the location is given, and pass the result on). ``file:`` URIs become their path,
    ``dbfs:/x`` becomes ``/dbfs/x``, ``s3a://`` and ``s3n://`` become ``s3://``, ``gcs://``
    becomes ``gs://``; ``hdfs://``, ``abfs://`` and ``abfss://`` stay. Needs no network.
    Raises ValueError naming the accepted schemes for any other scheme, or when this pyarrow
    was built without the filesystem the scheme needs.
    """
    text = os.fspath(uri)
    if not isinstance(text, str) or not text:
        raise ValueError(f"a location must be a non-empty path or URI, not {uri!r}")
    scheme = _scheme(text)
    if scheme is None:
        return os.path.abspath(text)
    if scheme not in URI_SCHEMES:
        raise ValueError(
            f"location {text!r}: unknown scheme {scheme + ':'!r}; use a local path or one of "
            f"{', '.join(s + ':' for s in URI_SCHEMES if s != 'mock')}"
        )
    target, fs_class = URI_SCHEMES[scheme]
    if not hasattr(pafs, fs_class):
        raise ValueError(
            f"location {text!r}: this pyarrow ({pa.__version__}) was built without {fs_class}, "
            f"which {scheme}: locations need; install a pyarrow with it or use another location"
        )
    parts = urlsplit(text)
    if scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ValueError(f"location {text!r}: a file: URI names a local path (file:///path), not host {parts.netloc!r}")
        return os.path.abspath(parts.path or "/")
    if scheme == "dbfs":
        return "/dbfs/" + posixpath.normpath("/" + parts.netloc + parts.path).lstrip("/")
    if not parts.netloc and scheme != "mock":
        raise ValueError(f"location {text!r} names no bucket, container or host: write {scheme}://<name>/<path>")
    return f"{target}://{text.split('://', 1)[1]}" if "://" in text else f"{target}:{text.split(':', 1)[1]}"


def filesystem_for(uri: str | os.PathLike[str]) -> tuple[pafs.FileSystem, str]:
    """The ``pyarrow.fs`` filesystem and the path inside it of a location (:func:`resolve_uri`)."""
    resolved = resolve_uri(uri)
    if "://" not in resolved:
        return pafs.LocalFileSystem(), resolved
    return pafs.FileSystem.from_uri(resolved)


def _scheme(text: str) -> str | None:
    """The lower-cased scheme of ``text``, or None for a plain path (including ``C:\\x``)."""
    head, sep, _ = text.partition(":")
    if not sep or len(head) < 2 or "/" in head or "\\" in head:
        return None
    if not (head[0].isalpha() and all(c.isalnum() or c in "+-." for c in head)):
        return None
    return head.lower()


def open_storage(uri: str | os.PathLike[str], filesystem: pafs.FileSystem | None = None, *,
                 sync: bool = True) -> Storage:
    """The storage for ``uri``: a local path or any location :func:`resolve_uri` accepts.

    With ``filesystem`` given, ``uri`` is a path inside it. ``sync=False``: on a local disk, no
    fsync (:class:`LocalStorage`), for files whose loss in a machine crash loses no data.
    """
    uri = os.fspath(uri)
    if filesystem is None:
        resolved = resolve_uri(uri)
        if "://" not in resolved:
            return LocalStorage(resolved, sync=sync)
        filesystem, root = pafs.FileSystem.from_uri(resolved)
        uri = resolved
    else:
        root = uri
    if isinstance(filesystem, pafs.LocalFileSystem):
        return LocalStorage(root, sync=sync)
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
