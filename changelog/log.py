"""One (operator, partition)'s changelog: a delta per version plus compacted snapshots.

    log = Changelog("/checkpoints/q1/state/p=0", retain_versions=10)
    log.append(0, puts=[(b"k", b"v")])
    log.append(1, deletes=[b"k"], delete_ranges=[(b"a", b"c")])
    log.versions()          # [0, 1]: what restore() can rebuild

The directory layout and file format are in ``streamjoin.changelog.format``; which files restore which
versions is in ``streamjoin.changelog.listing``. Every file is written whole under a temporary name and
moved into place, carries the CRC-32 of its bytes in its name, and is verified on every read.

Appending a version that is already there replaces it (a batch executed again writes its delta
again). Identical bytes to the delta there make this a no-op. Otherwise the history from that
version on was built on another delta (or its delta was compacted into a snapshot and cannot be
compared), so every file of that version and later is removed first, newest first, and then the
new delta is published: a crash at any point leaves a log whose newest versions are simply
missing, never a mix of old and new history.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, BinaryIO, Callable, Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from streamjoin.changelog.errors import ChangelogError, VersionNotRetainedError, VersionOrderError
from streamjoin.changelog.format import (
    BATCH_BYTES,
    BATCH_ROWS,
    COMPRESSED_BYTES,
    DELTA_OPTIONS,
    Delta,
    Kind,
    LogFile,
    SnapshotReader,
    decode_delta,
    encode_delta,
    encode_delta_columns,
    file_name,
    parse_name,
    snapshot_schema,
    temp_tag,
    verified_reader,
)
from streamjoin.changelog.listing import Listing
from streamjoin.changelog.storage import open_storage
from streamjoin.statestore.checksum import crc32
from streamjoin.statestore.chunks import SourceFile
from streamjoin.statestore.columns import ColumnWrite, strictly_ascending
from streamjoin.statestore.crc_file import write_in_pieces

__all__ = ["Changelog", "KeyValue", "rebatch", "check_retention"]

KeyValue = tuple[bytes, bytes]


class Changelog:
    """The changelog at ``uri`` (a local path or a ``pyarrow.fs`` URI) of one partition.

    ``retain_versions`` (>= 2) is how many of the newest versions compaction keeps restorable; at
    least two, because the newest batch may be executed again, which starts from the one before.
    ``filesystem``, when given, is the ``pyarrow.fs.FileSystem`` and ``uri`` a path inside it.
    Safe for one appending writer plus any number of readers and compactions at a time.
    """

    def __init__(
        self,
        uri: str | os.PathLike[str],
        *,
        retain_versions: int = 10,
        filesystem: pafs.FileSystem | None = None,
        cache_listing: bool = False,
    ) -> None:
        check_retention(retain_versions)
        self.uri = os.fspath(uri)
        self.retain_versions = retain_versions
        self.storage = open_storage(self.uri, filesystem)
        self.cache_listing = cache_listing
        self._listing: Listing | None = None

    def __repr__(self) -> str:
        return f"Changelog({self.uri!r}, retain_versions={self.retain_versions})"

    # -- what is there --------------------------------------------------------------------------

    def listing(self) -> Listing:
        """The files present now (one directory listing; nothing is read). With ``cache_listing``
        (a task's own log: one writer), the listing is kept until this object writes or deletes
        a file, so the steps of one task list the directory once between writes."""
        if self._listing is not None:
            return self._listing
        found = Listing.from_files(self.storage.uri, self.storage.list())
        if self.cache_listing:
            self._listing = found
        return found

    def versions(self) -> list[int]:
        """Versions that present files can restore, ascending (checksums are checked on restore)."""
        return self.listing().restorable()

    def latest(self) -> int | None:
        """The newest restorable version, or None for an empty log."""
        versions = self.versions()
        return versions[-1] if versions else None

    def snapshot_versions(self) -> list[int]:
        return sorted(self.listing().snapshots)

    def delta_versions(self) -> list[int]:
        return sorted(self.listing().deltas)

    # -- writing --------------------------------------------------------------------------------

    def append(
        self,
        version: int,
        puts: Iterable[KeyValue] = (),
        deletes: Iterable[bytes] = (),
        delete_ranges: Iterable[tuple[bytes, bytes]] = (),
    ) -> LogFile:
        """Durably and atomically write the delta of ``version``; return the file written.

        ``version - 1`` must be restorable (or ``version`` is 0, or the log is empty: a first
        version ``k > 0`` is preceded by an empty snapshot at ``k - 1``). Raises
        ``VersionOrderError`` when versions before it are missing, and
        ``VersionNotRetainedError`` when ``version - 1`` was compacted away. Raises TypeError
        (nothing written) for keys or values that are not ``bytes``.
        """
        _check_version(version)
        return self._append_batch(version, encode_delta(Kind.DELTA, version, _seq(puts), _seq(deletes),
                                                        _seq(delete_ranges)))

    def append_columns(self, version: int, write: ColumnWrite) -> LogFile:
        """``append`` of a write given as Arrow columns (the same delta file, byte for byte, as
        ``append`` of the same entries in the same order)."""
        return self.append_columns_file(version, write)[0]

    def append_columns_file(self, version: int, write: ColumnWrite) -> tuple[LogFile, SourceFile]:
        """``append_columns``, and the delta as a ``SourceFile`` (its bytes, CRC-32 and path
        on this machine's disk, None for a log in object storage): an Arrow file whose ``key``
        and ``value`` columns are the write's range deletes (``op`` 2), its deletes (null values)
        then its puts, which a store may take as its own copy of the write (``ColumnWrite.file``)."""
        _check_version(version)
        file, payload = self._append_payload(version, encode_delta_columns(Kind.DELTA, version, write))
        return file, SourceFile(payload, file.crc, self.storage.local_path(file.name))

    def _append_batch(self, version: int, batch: pa.RecordBatch) -> LogFile:
        return self._append_payload(version, batch)[0]

    def _append_payload(self, version: int, batch: pa.RecordBatch) -> tuple[LogFile, pa.Buffer]:
        """The delta of ``batch`` published; its file and bytes."""
        payload = _ipc_bytes(batch)
        listing = self.listing()
        self._check_base(listing, version)
        if listing.empty and version > 0:
            self.write_snapshot(version - 1, ())
        existing = listing.deltas.get(version)
        if existing is None or existing.crc != crc32(payload):
            self._drop_history_from(listing, version)  # no-op for a plain next version
        return self._publish(Kind.DELTA, version, lambda sink: sink.write(payload)), payload

    def write_snapshot(self, version: int, chunks: Iterable[tuple[pa.Array, pa.Array]],
                       copy: str | None = None) -> LogFile:
        """Write the snapshot of ``version`` from (keys, values) chunks in strictly ascending order.

        Record batches end at ``BATCH_ROWS`` entries or before passing ``BATCH_BYTES`` bytes
        (see ``rebatch``) whatever the chunking, so one state always gives the same bytes
        and the same file name, and memory stays bounded however large the values. Raises
        ChangelogError (nothing published) when the keys are not strictly ascending.
        ``copy``: a path on this machine's disk the same bytes are written to as well (for a
        store to take, ``local_snapshot``; the caller removes it).
        """
        _check_version(version)
        schema = snapshot_schema(version)

        def produce(sink: object) -> None:
            with contextlib.ExitStack() as files:
                target = sink if copy is None else _Copying(sink, files.enter_context(open(copy, "wb")))
                with pa.ipc.new_file(target, schema) as writer:
                    previous = None
                    for keys, values in rebatch(chunks):
                        previous = _check_ascending(keys, previous, self.uri, version)
                        writer.write_batch(pa.record_batch([keys, values], schema=schema))

        return self._publish(Kind.SNAPSHOT, version, produce)

    def delete(self, names: list[str]) -> None:
        """Remove files by name, in the order given."""
        self._listing = None
        self.storage.delete(names)

    # -- reading --------------------------------------------------------------------------------

    def read_delta(self, file: LogFile) -> Delta:
        """The verified contents of a delta file (raises ChangelogCorruptError when damaged)."""
        return decode_delta(verified_reader(self._read(file), file), file)

    def read_snapshot(self, file: LogFile) -> SnapshotReader:
        """The verified contents of a snapshot file (raises ChangelogCorruptError when damaged)."""
        data = self._read(file)
        return SnapshotReader(verified_reader(data, file), file,
                              SourceFile(data, file.crc, self.storage.local_path(file.name)))

    @property
    def local(self) -> bool:
        """Whether the log's files are on this machine's disk (not in an object store)."""
        return self.storage.local_path(".") is not None

    def local_snapshot(self, file: LogFile, copy: str | None = None) -> SnapshotReader | None:
        """A snapshot this log just wrote or checked, read from its file on this machine's disk
        (or from ``copy``, the copy ``write_snapshot`` wrote beside it) without checking its
        CRC-32 again (it was computed as the file was written, or checked by the caller); None
        where neither is on this disk."""
        path = copy if copy is not None else self.storage.local_path(file.name)
        if path is None:
            return None
        if copy is None:
            data = self._read(file)
        else:
            with pa.memory_map(copy, "r") as mapped:
                data = mapped.read_buffer()
        return SnapshotReader(pa.ipc.open_file(data), file, SourceFile(data, file.crc, path))

    # -- internals ------------------------------------------------------------------------------

    def _read(self, file: LogFile) -> pa.Buffer:
        try:
            return self.storage.read(file.name)
        except FileNotFoundError as exc:
            raise ChangelogError(
                f"changelog file {file.name} in {self.uri} disappeared while it was being read "
                "(a concurrent compaction removed it); retry the operation",
                files=[file.name], versions=(file.version, file.version)) from exc

    def _publish(self, kind: Kind, version: int, produce: Callable[[BinaryIO], object]) -> LogFile:
        self._listing = None
        info = self.storage.write_atomic(
            temp_tag(kind, version), produce, lambda crc: file_name(kind, version, crc))
        published = parse_name(info.name, info.size)
        assert published is not None, info.name
        return published

    def _check_base(self, listing: Listing, version: int) -> None:
        if version == 0 or listing.empty:
            return
        restorable = listing.restorable()
        if version - 1 in restorable:
            return
        newest = listing.newest
        if newest is not None and version - 1 > newest:
            raise VersionOrderError(
                f"cannot append version {version} to changelog {self.uri}: its newest version is "
                f"{newest}, so versions {newest + 1}..{version - 1} would be missing; append them "
                "first", versions=(newest + 1, version - 1))
        raise VersionNotRetainedError(
            f"cannot append version {version} to changelog {self.uri}: version {version - 1}, "
            f"which it applies to, is not restorable (restorable: {_summary(restorable)})",
            versions=(version - 1, version - 1))

    def _drop_history_from(self, listing: Listing, version: int) -> None:
        """Remove every file of ``version`` and later, newest first (at one version, the snapshot
        before the delta), so each intermediate state is a consistent shorter log."""
        doomed = sorted((f for f in listing.files() if f.version >= version), reverse=True)
        self._listing = None
        self.storage.delete([f.name for f in doomed])


def check_retention(retain_versions: object) -> int:
    """``retain_versions`` if it is an int >= 2, else ValueError saying why."""
    if not isinstance(retain_versions, int) or isinstance(retain_versions, bool) or retain_versions < 2:
        raise ValueError(
            f"retain_versions must be an int >= 2, not {retain_versions!r}: the newest batch may be "
            "executed again, and that restores the version before it")
    return retain_versions


def _check_version(version: int) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise TypeError(f"a changelog version is an int >= 0, not {version!r}")


def _seq(items: Iterable) -> list:
    return items if isinstance(items, list) else list(items)


def _ipc_bytes(batch: pa.RecordBatch) -> pa.Buffer:
    """``batch`` as the bytes of a delta's Arrow IPC file (``DELTA_OPTIONS`` from
    ``COMPRESSED_BYTES``). Uncompressed, they are written into a buffer of their exact size (a
    first pass counts them without copying: a growing buffer copied itself at each doubling);
    compressed, into a growing buffer, as a first pass would compress them twice."""
    if DELTA_OPTIONS.compression is not None and batch.nbytes >= COMPRESSED_BYTES:
        sink = pa.BufferOutputStream()
        with pa.ipc.new_file(sink, batch.schema, options=DELTA_OPTIONS) as writer:
            writer.write_batch(batch)
        return sink.getvalue()
    sizing = pa.MockOutputStream()
    with pa.ipc.new_file(sizing, batch.schema) as writer:
        writer.write_batch(batch)
    buffer = pa.allocate_buffer(sizing.size())
    with pa.ipc.new_file(pa.FixedSizeBufferWriter(buffer), batch.schema) as writer:
        writer.write_batch(batch)
    return buffer


def _check_ascending(keys: pa.Array, previous: bytes | None, uri: str, version: int) -> bytes | None:
    """Raise unless ``keys`` are strictly ascending and above ``previous``; return the last key."""
    if len(keys) == 0:
        return previous
    first = keys[0].as_py()
    if not strictly_ascending(keys) or (previous is not None and first <= previous):
        raise ChangelogError(
            f"snapshot {version} of changelog {uri}: keys must be strictly ascending; the source "
            "of the snapshot is not sorted (a bug: report it)", versions=(version, version))
    return keys[len(keys) - 1].as_py()


def _summary(versions: list[int]) -> str:
    if not versions:
        return "none"
    return f"{versions[0]}..{versions[-1]}" if len(versions) > 1 else str(versions[0])


def rebatch(
    chunks: Iterable[tuple[pa.Array, pa.Array]], size: int = BATCH_ROWS, max_bytes: int = BATCH_BYTES
) -> Iterator[tuple[pa.Array, pa.Array]]:
    """The same entries as ``chunks``, regrouped so that a chunk ends exactly when it holds
    ``size`` entries or the next entry would take its keys and values past ``max_bytes`` bytes
    (a chunk holds at least one entry): the cut points depend on the entries, not on ``chunks``."""
    keys: list[pa.Array] = []
    values: list[pa.Array] = []
    pending = pending_bytes = 0
    for k, v in chunks:
        n = len(k)
        if not n:
            continue
        sizes = np.cumsum(pc.add(pc.binary_length(k), pc.binary_length(v)).to_numpy(zero_copy_only=False))
        start = 0
        while start < n:
            room = min(size - pending, n - start)
            base = sizes[start - 1] if start else 0
            fits = int(np.searchsorted(sizes[start:start + room] - base, max_bytes - pending_bytes, side="right"))
            if fits == 0 and pending == 0:
                fits = 1
            if fits:
                keys.append(k.slice(start, fits))
                values.append(v.slice(start, fits))
                pending += fits
                pending_bytes += int(sizes[start + fits - 1] - base)
                start += fits
            if pending == size or fits < room:
                yield _combine(keys), _combine(values)
                keys, values, pending, pending_bytes = [], [], 0, 0
    if pending:
        yield _combine(keys), _combine(values)


def _combine(arrays: list[pa.Array]) -> pa.Array:
    return arrays[0] if len(arrays) == 1 else pa.concat_arrays(arrays)


class _Copying:
    """A write-only file object that forwards to ``sink`` and writes the same bytes to ``copy``."""

    def __init__(self, sink: Any, copy: BinaryIO) -> None:
        self._sink, self._copy = sink, copy
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        write_in_pieces(self._copy, view)
        return int(self._sink.write(view))

    def tell(self) -> int:
        return int(self._sink.tell())

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
