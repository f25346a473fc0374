"""The bytes of changelog files: names, Arrow IPC layouts, checksums and their verification.

File names (``<v>`` is the version in 20 decimal digits so names sort by version; ``<crc>`` is the
CRC-32 of the whole file in 8 hex digits)::

    delta-<v>-<crc>.arrow       the writes of version v: columns op (int8), key, value
    snapshot-<v>-<crc>.arrow    every live key as of version v, ascending: columns key, value
    undo-<v>-<crc>.arrow        (beside a local store) the writes that take it from v back to v-1

A delta row is a put (op 0: key, value), a delete (op 1: key, value null) or a range delete (op 2:
``[key, value)``). Rows are stored range deletes first, then deletes, then puts, the order in which
:meth:`streamjoin.statestore.Store.write` applies them. Every file is an Arrow IPC *file* (random access,
memory-mappable) whose schema metadata records its kind and version; a reader checks the checksum
of the bytes first, then the Arrow footer, then the metadata, and raises a
:class:`~streamjoin.changelog.errors.ChangelogCorruptError` naming the file for any mismatch.

A delta's buffers are compressed with zstd at level 1 (Arrow IPC's own body compression,
``DELTA_OPTIONS``; any Arrow reader decompresses them), where pyarrow has the codec: a delta is
written with fsync and read again only to restore, and a join's state entries compress well (a
table join's deltas to 0.13-0.16 of their bytes, at about 600 MB/s; LZ4 gave 0.34-0.37 in about
four fifths of the time). A delta of less than ``COMPRESSED_BYTES`` (1 MiB) of columns is
written plain: the few milliseconds its compression costs are more than writing its bytes does
(an interval join's or an enrichment's deltas of a few thousand entries took 1.2-1.3x the store
time compressed, ``streamjoin bench store-time``). A snapshot is not compressed: a store may take it as its own base and
read its values in place, through a memory map. Files written without compression (before 0.3's
design step 32, or where pyarrow lacks zstd) read the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from operator import itemgetter
from typing import Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.changelog.errors import ChangelogCorruptError, ChecksumMismatchError, TornFileError
from streamjoin.changelog.storage import TEMP_PREFIX
from streamjoin.statestore.checksum import crc32
from streamjoin.statestore.chunks import SourceFile
from streamjoin.statestore.columns import ColumnWrite

__all__ = [
    "Kind", "LogFile", "parse_name", "file_name", "Delta", "encode_delta", "decode_delta",
    "SNAPSHOT_SCHEMA", "DELTA_SCHEMA", "snapshot_schema", "SnapshotReader", "verified_reader",
    "PUT", "DELETE", "DELETE_RANGE", "BATCH_ROWS", "BATCH_BYTES", "check_write", "DELTA_OPTIONS", "COMPRESSED_BYTES",
]

PUT, DELETE, DELETE_RANGE = 0, 1, 2
FORMAT = "1"
#: Rows per record batch in snapshots: big enough to amortise per-batch work, small to stream.
BATCH_ROWS = 65536
#: A snapshot record batch also ends before its keys and values would pass this many bytes (a
#: batch holds at least one entry), so memory stays bounded when values are large blobs.
BATCH_BYTES = 8 << 20

#: How a delta's Arrow IPC file of at least ``COMPRESSED_BYTES`` is written: zstd-compressed
#: buffers (level 1) where pyarrow has the codec (see module).
DELTA_OPTIONS = pa.ipc.IpcWriteOptions(
    compression=pa.Codec("zstd", compression_level=1) if pa.Codec.is_available("zstd") else None)
#: A delta whose columns hold fewer bytes than this is written without compression (see module).
COMPRESSED_BYTES = 1 << 20

_BIN = pa.large_binary()
DELTA_SCHEMA = pa.schema([("op", pa.int8(), False), ("key", _BIN, False), ("value", _BIN)])
SNAPSHOT_SCHEMA = pa.schema([("key", _BIN, False), ("value", _BIN, False)])
_ARROW_MAGIC = b"ARROW1"
_FIRST, _SECOND = itemgetter(0), itemgetter(1)


class Kind(str, Enum):
    """What a changelog file holds."""

    DELTA = "delta"
    SNAPSHOT = "snapshot"
    UNDO = "undo"


@dataclass(frozen=True, order=True)
class LogFile:
    """One published file: parsed from its name, plus its size."""

    version: int
    kind: Kind
    crc: int
    name: str
    size: int


_NAME = re.compile(r"^(delta|snapshot|undo)-(\d{20})-([0-9a-f]{8})\.arrow$")


def file_name(kind: Kind, version: int, crc: int) -> str:
    return f"{kind.value}-{version:020d}-{crc:08x}.arrow"


def parse_name(name: str, size: int) -> LogFile | None:
    """The file a name denotes, or None for a name that is not a published changelog file."""
    match = _NAME.match(name)
    if not match:
        return None
    return LogFile(int(match.group(2)), Kind(match.group(1)), int(match.group(3), 16), name, size)


def temp_tag(kind: Kind, version: int) -> str:
    """The tag of a temporary file being written for ``kind`` at ``version``."""
    return f"{kind.value}-{version:020d}"


def temp_version(name: str) -> int | None:
    """The version in a temporary file's name (None if it is not one of ours)."""
    match = re.match(rf"^{re.escape(TEMP_PREFIX)}(?:delta|snapshot|undo)-(\d{{20}})-", name)
    return int(match.group(1)) if match else None


def _metadata(kind: Kind, version: int, extra: dict[str, str] | None = None) -> dict[str, str]:
    return {"streamjoin.kind": kind.value, "streamjoin.version": str(version),
            "streamjoin.format": FORMAT, **(extra or {})}


def snapshot_schema(version: int) -> pa.Schema:
    return SNAPSHOT_SCHEMA.with_metadata(_metadata(Kind.SNAPSHOT, version))


# -- deltas ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Delta:
    """One version's writes as Arrow arrays (see module docstring for the semantics)."""

    version: int
    range_starts: pa.Array
    range_ends: pa.Array
    delete_keys: pa.Array
    put_keys: pa.Array
    put_values: pa.Array
    metadata: dict[str, str]

    @property
    def entries(self) -> int:
        return len(self.range_starts) + len(self.delete_keys) + len(self.put_keys)

    def as_write(self) -> tuple[list[tuple[bytes, bytes]], list[bytes], list[tuple[bytes, bytes]]]:
        """``(puts, deletes, delete_ranges)`` as Python lists, ready for ``Store.write``."""
        puts = list(zip(self.put_keys.to_pylist(), self.put_values.to_pylist()))
        ranges = list(zip(self.range_starts.to_pylist(), self.range_ends.to_pylist()))
        return puts, self.delete_keys.to_pylist(), ranges


def encode_delta(
    kind: Kind,
    version: int,
    puts: Sequence[tuple[bytes, bytes]],
    deletes: Sequence[bytes],
    delete_ranges: Sequence[tuple[bytes, bytes]],
    extra: dict[str, str] | None = None,
) -> pa.RecordBatch:
    """The record batch of a delta (or undo record). Raises TypeError for non-bytes keys/values."""
    put_keys, put_values, deletes, starts, ends = check_write(puts, deletes, delete_ranges)
    ops = pa.concat_arrays([
        pa.repeat(pa.scalar(op, pa.int8()), n)
        for op, n in ((DELETE_RANGE, len(starts)), (DELETE, len(deletes)), (PUT, len(put_keys)))
    ])
    keys = pa.array(starts + deletes + put_keys, _BIN)
    values = pa.array(ends + [None] * len(deletes) + put_values, _BIN)
    schema = DELTA_SCHEMA.with_metadata(_metadata(kind, version, extra))
    return pa.record_batch([ops, keys, values], schema=schema)


def encode_delta_columns(kind: Kind, version: int, write: ColumnWrite) -> pa.RecordBatch:
    """``encode_delta`` of a column write (range deletes, then deletes, then puts)."""
    ranges, deletes, puts = len(write.delete_ranges), len(write.delete_keys), len(write.put_keys)
    ops = pa.concat_arrays([pa.repeat(pa.scalar(DELETE_RANGE, pa.int8()), ranges),
                            pa.repeat(pa.scalar(DELETE, pa.int8()), deletes),
                            pa.repeat(pa.scalar(PUT, pa.int8()), puts)])
    starts = pa.array([start for start, _ in write.delete_ranges], _BIN)
    ends = pa.array([end for _, end in write.delete_ranges], _BIN)
    keys = pa.concat_arrays([starts, write.delete_keys.cast(_BIN), write.put_keys.cast(_BIN)])
    values = pa.concat_arrays([ends, pa.nulls(deletes, _BIN), write.put_values.cast(_BIN)])
    return pa.record_batch([ops, keys, values], schema=DELTA_SCHEMA.with_metadata(_metadata(kind, version)))


def decode_delta(reader: pa.ipc.RecordBatchFileReader, file: LogFile) -> Delta:
    """The :class:`Delta` in a file already checked by :func:`verified_reader`."""
    table = reader.read_all()
    ops, keys, values = (_one_array(table.column(i)) for i in range(3))
    parts = _split_by_op(ops, keys, values)
    known = sum(len(k) for k, _ in parts.values())
    if known != len(ops) or parts[PUT][1].null_count or parts[DELETE_RANGE][1].null_count:
        raise ChangelogCorruptError(
            f"changelog file {file.name}: rows with an unknown op or a missing value; the file "
            "was not written by streamjoin's changelog. " + _advice(file),
            files=[file.name], versions=(file.version, file.version),
        )
    return Delta(file.version, parts[DELETE_RANGE][0], parts[DELETE_RANGE][1], parts[DELETE][0],
                 parts[PUT][0], parts[PUT][1], _decoded_metadata(table.schema))


def _one_array(column: pa.ChunkedArray) -> pa.Array:
    """The column as one array, without a copy when it is one chunk (combine_chunks copies)."""
    return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()


def _split_by_op(ops: pa.Array, keys: pa.Array, values: pa.Array) -> dict[int, tuple[pa.Array, pa.Array]]:
    """(keys, values) per op: zero-copy slices when rows are in the order written (range deletes,
    deletes, puts), else filtered copies."""
    counts = {op: pc.sum(pc.equal(ops, op)).as_py() or 0 for op in (DELETE_RANGE, DELETE, PUT)}
    parts, start = {}, 0
    for op, n in counts.items():
        if n and not pc.all(pc.equal(ops.slice(start, n), op)).as_py():
            return {op: (keys.filter(pc.equal(ops, op)), values.filter(pc.equal(ops, op)))
                    for op in counts}
        parts[op] = (keys.slice(start, n), values.slice(start, n))
        start += n
    return parts


def check_write(
    puts: Sequence[tuple[bytes, bytes]],
    deletes: Sequence[bytes],
    delete_ranges: Sequence[tuple[bytes, bytes]],
) -> tuple[list[bytes], list[bytes], list[bytes], list[bytes], list[bytes]]:
    """(put keys, put values, deletes, range starts, range ends) as lists, every one checked to be
    ``bytes`` (one pass over the types, no Python work per entry); raises TypeError otherwise."""
    put_keys, put_values = _unzip(puts)
    starts, ends = _unzip(delete_ranges)
    deletes = list(deletes)
    for what, items in (("put key", put_keys), ("put value", put_values), ("delete key", deletes),
                        ("range start", starts), ("range end", ends)):
        _check_bytes(what, items)
    return put_keys, put_values, deletes, starts, ends


def _decoded_metadata(schema: pa.Schema) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}


def _unzip(pairs: Sequence[tuple[bytes, bytes]]) -> tuple[list[bytes], list[bytes]]:
    if not pairs:
        return [], []
    if set(map(len, pairs)) != {2}:
        raise TypeError("every put and range delete must be a (bytes, bytes) pair")
    return list(map(_FIRST, pairs)), list(map(_SECOND, pairs))


def _check_bytes(what: str, items: list) -> None:
    if items and set(map(type, items)) != {bytes}:
        bad = next(item for item in items if type(item) is not bytes)
        raise TypeError(f"changelog {what}s must be bytes, got {type(bad).__name__}: {bad!r}")


# -- reading with verification --------------------------------------------------------------------


def verified_reader(buffer: pa.Buffer, file: LogFile) -> pa.ipc.RecordBatchFileReader:
    """An Arrow reader over ``buffer`` after checking its checksum, footer, kind and version."""
    crc = crc32(buffer)
    if crc != file.crc:
        kind = TornFileError if not bytes(buffer[-6:]) == _ARROW_MAGIC else ChecksumMismatchError
        what = ("ends before its Arrow footer (a torn or truncated write)" if kind is TornFileError
                else f"has CRC-32 {crc:08x}, its name says {file.crc:08x} (its bytes were damaged)")
        raise kind(f"changelog file {file.name} ({len(buffer)} bytes) {what}; "
                   + _advice(file), files=[file.name], versions=(file.version, file.version))
    try:
        reader = pa.ipc.open_file(buffer)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ChangelogCorruptError(
            f"changelog file {file.name} is not an Arrow IPC file ({exc}); " + _advice(file),
            files=[file.name], versions=(file.version, file.version)) from exc
    meta = _decoded_metadata(reader.schema)
    expected = DELTA_SCHEMA if file.kind is not Kind.SNAPSHOT else SNAPSHOT_SCHEMA
    if (meta.get("streamjoin.kind") != file.kind.value
            or meta.get("streamjoin.version") != str(file.version)
            or not reader.schema.remove_metadata().equals(expected)):
        raise ChangelogCorruptError(
            f"changelog file {file.name} holds {meta.get('streamjoin.kind')} version "
            f"{meta.get('streamjoin.version')} with schema {reader.schema.remove_metadata()}, not "
            f"what its name says; it was renamed or written by another tool. " + _advice(file),
            files=[file.name], versions=(file.version, file.version))
    return reader


def _advice(file: LogFile) -> str:
    if file.kind is Kind.SNAPSHOT:
        return ("restore falls back to an older snapshot and its deltas if the log still has them; "
                "`streamjoin changelog verify` lists what remains restorable")
    return (f"versions from {file.version} on cannot be restored through it; restore an earlier "
            "version, or re-run the query from a checkpoint before it")


class SnapshotReader:
    """The verified contents of one snapshot: ``entries`` and ``chunks()`` of (keys, values)."""

    def __init__(self, reader: pa.ipc.RecordBatchFileReader, file: LogFile, source: SourceFile) -> None:
        self._reader = reader
        self.file = file
        #: the snapshot file itself (its bytes checked), which a store may keep as it is
        self.source = source
        self.entries = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))

    def chunks(self) -> Iterator[tuple[pa.Array, pa.Array]]:
        """Record batches in key order, as (keys, values) arrays."""
        for i in range(self._reader.num_record_batches):
            batch = self._reader.get_batch(i)
            if batch.num_rows:
                yield batch.column(0), batch.column(1)
