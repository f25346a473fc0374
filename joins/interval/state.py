"""The state layout of the interval join: time-bucketed Arrow blobs, match marks, one watermark.

Keys (byte order = bucket order, see :mod:`streamjoin.statestore.codecs`)::

    b"\\x00watermark"                                    -> encode_int(watermark of the last version)
    side | encode_timestamp(bucket) | b"m" | encode_int(version)              -> ids matched in version
    side | encode_timestamp(bucket) | b"r" | encode_int(version) | chunk(u32) -> rows (Arrow IPC stream)

``side`` is ``b"L"`` or ``b"R"``. A row is filed under the bucket of its **expiry time** ``e``
(left: ``t + upper``, right: ``t - lower``): the row may still match while ``e >= watermark``, so
the rows that can be evicted are exactly those of the buckets below the watermark, and eviction is
one range delete per side, whatever the state size. A row blob holds the rows of one bucket that
arrived in one version, in canonical order, plus a :data:`ROW_ID` column; rows are never rewritten.
Outer, semi and anti joins record which rows matched as small blobs of row ids (sorted int64,
little-endian) per (side, bucket, version), so a match does not rewrite a row blob. The watermark
entry says which windows have closed already: a version outputs the unmatched rows whose expiry is
in ``[stored watermark, new watermark)``, so each is output exactly once although a bucket is only
deleted once all of it is below the watermark.

**Reads**: a version reads only the buckets its new rows can match (a new row at ``t`` matches
rows of the other side with expiry in ``[t, t + upper - lower]``) and, on a side whose unmatched
rows are output, the buckets whose windows close in this version. It reads them in groups of at
most ``group_rows`` rows (:func:`scan_groups`), so memory is bounded by the group, not the state.
Groups of blobs take the place of sharding the state by a key hash: they bound memory the same
way without hashing keys in Python, and cost one more hash join per group of state rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.runtime.operator import NEG_INF
from streamjoin.statestore.base import KeyValue, Store, prefix_end
from streamjoin.statestore.codecs import decode_int, encode_int, encode_timestamp

__all__ = [
    "SIDE_PREFIX", "WATERMARK_KEY", "Group", "BucketRange", "read_watermark", "watermark_put",
    "rows_puts", "marks_put", "scan_groups", "eviction_range", "bucket_start",
]

SIDE_PREFIX = {"left": b"L", "right": b"R"}
WATERMARK_KEY = b"\x00watermark"
_MARKS, _ROWS = b"m", b"r"

#: Inclusive range of bucket starts; None is unbounded.
BucketRange = tuple[int | None, int | None]


@dataclass
class Group:
    """Some state rows of one side (row blobs, decoded), with the match marks of their buckets."""

    tables: list[pa.Table] = field(default_factory=list)
    marks: list[np.ndarray] = field(default_factory=list)


def bucket_start(expiry: int, width: int) -> int:
    """The start of the bucket holding expiry time ``expiry`` (floor, also for negative times)."""
    return (expiry // width) * width


def read_watermark(store: Store) -> int:
    """The watermark of the last committed version of this partition (NEG_INF before any)."""
    value = store.get(WATERMARK_KEY)
    return NEG_INF if value is None else decode_int(value)


def watermark_put(watermark: int) -> KeyValue:
    return WATERMARK_KEY, encode_int(watermark)


def _bucket_prefix(side: str, start: int) -> bytes:
    return SIDE_PREFIX[side] + encode_timestamp(start)


def rows_puts(
    side: str, start: int, version: int, table: pa.Table, blob_rows: int, compression: str | None
) -> list[KeyValue]:
    """The puts storing ``table`` (rows of one bucket arriving in ``version``), in chunks."""
    prefix = _bucket_prefix(side, start) + _ROWS + encode_int(version)
    options = pa.ipc.IpcWriteOptions(compression=compression)
    puts = []
    for chunk, offset in enumerate(range(0, table.num_rows, blob_rows)):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
            writer.write_table(table.slice(offset, blob_rows))
        puts.append((prefix + chunk.to_bytes(4, "big"), sink.getvalue().to_pybytes()))
    return puts


def marks_put(side: str, start: int, version: int, ids: np.ndarray) -> KeyValue:
    """The put recording that rows ``ids`` of a bucket matched in ``version``."""
    key = _bucket_prefix(side, start) + _MARKS + encode_int(version)
    return key, np.sort(ids).astype("<i8").tobytes()


def scan_groups(store: Store, side: str, ranges: Sequence[BucketRange], max_rows: int) -> Iterator[Group]:
    """The rows of ``side`` within ``ranges`` (sorted, disjoint), in key order, in groups of at most
    ``max_rows`` rows (or one blob), each with the marks of every bucket it has rows of.

    A bucket's marks sort before its rows, so they are known when its rows are; a group cut inside
    a bucket hands that bucket's marks on to the next group. Memory is bounded by the group.
    """
    group, rows = Group(), 0
    bucket, bucket_marks = b"", []
    for key, value in _scan(store, side, ranges):
        if key[1:9] != bucket:
            bucket, bucket_marks = key[1:9], []
        if key[9:10] == _MARKS:
            ids = np.frombuffer(value, dtype="<i8")
            bucket_marks.append(ids)
            group.marks.append(ids)
            continue
        table = pa.ipc.open_stream(value).read_all()
        if group.tables and rows + table.num_rows > max_rows:
            yield group
            group, rows = Group(marks=list(bucket_marks)), 0
        group.tables.append(table)
        rows += table.num_rows
    if group.tables:
        yield group


def _scan(store: Store, side: str, ranges: Sequence[BucketRange]) -> Iterator[KeyValue]:
    prefix = SIDE_PREFIX[side]
    for lo, hi in ranges:
        start = prefix if lo is None else _bucket_prefix(side, lo)
        yield from store.scan(start, prefix_end(prefix if hi is None else _bucket_prefix(side, hi)))


def eviction_range(side: str, below: int | None) -> tuple[bytes, bytes]:
    """The range delete removing every bucket of ``side`` that starts before ``below`` (None: all)."""
    prefix = SIDE_PREFIX[side]
    end = prefix_end(prefix) if below is None else _bucket_prefix(side, below)
    return prefix, end
