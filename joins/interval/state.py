"""The state layout of the interval join: time-bucketed Arrow blobs, match marks, one watermark.

Keys (byte order = bucket order, see :mod:`streamjoin.statestore.codecs`), declared as the areas
of :data:`LAYOUT` (:mod:`streamjoin.runtime.areas`)::

    b"\\x00watermark"                                    -> encode_int(watermark of the last version)
    side | encode_timestamp(bucket) | b"m" | encode_int(version)  -> ids matched in version
    side | encode_timestamp(bucket) | b"r" | encode_int(version) | encode_uint32(chunk)
                                                                 -> rows (Arrow IPC stream)

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

from streamjoin.runtime.areas import ARROW, BYTE, INT, RAW, TIMESTAMP, UINT32, Area, Int64s, Ints, StateLayout
from streamjoin.runtime.evolution import as_schema
from streamjoin.runtime.operator import NEG_INF
from streamjoin.statestore.base import KeyValue, Store

__all__ = [
    "LAYOUT", "Group", "BucketRange", "read_watermark", "watermark_put",
    "rows_puts", "marks_put", "scan_groups", "eviction_range", "bucket_start",
]

_SIDE_KEY = (("bucket", TIMESTAMP), ("kind", BYTE), ("version", INT), ("chunk", UINT32))

#: The interval join's state (see module); its version is the definition's ``layout``.
LAYOUT = StateLayout("interval join", 1, (
    Area("watermark", b"\x00watermark", (), Ints(1)),
    # values by kind: b"m" marks (row ids, Int64s), b"r" rows (Arrow IPC stream, ARROW)
    Area("left", b"L", _SIDE_KEY, RAW),
    Area("right", b"R", _SIDE_KEY, RAW),
))
_WATERMARK = LAYOUT["watermark"]
_SIDES = {"left": LAYOUT["left"], "right": LAYOUT["right"]}
_MARKS, _ROWS = b"m", b"r"
_IDS = Int64s()

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
    value = _WATERMARK.get(store)
    return NEG_INF if value is None else value[0]


def watermark_put(watermark: int) -> KeyValue:
    return _WATERMARK.put((watermark,))


def rows_puts(
    side: str, start: int, version: int, table: pa.Table, blob_rows: int, compression: str | None
) -> list[KeyValue]:
    """The puts storing ``table`` (rows of one bucket arriving in ``version``), in chunks."""
    area = _SIDES[side]
    return [(area.key(start, _ROWS, version, chunk), ARROW.encode(table.slice(offset, blob_rows), compression))
            for chunk, offset in enumerate(range(0, table.num_rows, blob_rows))]


def marks_put(side: str, start: int, version: int, ids: np.ndarray) -> KeyValue:
    """The put recording that rows ``ids`` of a bucket matched in ``version``."""
    return _SIDES[side].key(start, _MARKS, version), _IDS.encode(np.sort(ids))


def scan_groups(store: Store, side: str, ranges: Sequence[BucketRange], max_rows: int,
                schema: pa.Schema | None = None) -> Iterator[Group]:
    """The rows of ``side`` within ``ranges`` (sorted, disjoint), in key order, in groups of at most
    ``max_rows`` rows (or one blob), each with the marks of every bucket it has rows of; each blob
    in ``schema`` (the side's stored columns: one written under an earlier schema of the side is
    read in it, :func:`streamjoin.runtime.evolution.as_schema`; None: as stored).

    A bucket's marks sort before its rows, so they are known when its rows are; a group cut inside
    a bucket hands that bucket's marks on to the next group. Memory is bounded by the group.
    """
    area = _SIDES[side]
    at_bucket, at_kind = area.offset("bucket"), area.offset("kind")
    group, rows = Group(), 0
    bucket = b""
    bucket_marks: list[np.ndarray] = []
    for lo, hi in ranges:
        for key, value in area.scan_span(store, None if lo is None else (lo,), None if hi is None else (hi,)):
            if key[at_bucket] != bucket:
                bucket, bucket_marks = key[at_bucket], []
            if key[at_kind] == _MARKS:
                ids = _IDS.decode(value)
                bucket_marks.append(ids)
                group.marks.append(ids)
                continue
            table = ARROW.decode(value) if schema is None else as_schema(ARROW.decode(value), schema)
            if group.tables and rows + table.num_rows > max_rows:
                yield group
                group, rows = Group(marks=list(bucket_marks)), 0
            group.tables.append(table)
            rows += table.num_rows
    if group.tables:
        yield group


def eviction_range(side: str, below: int | None) -> tuple[bytes, bytes]:
    """The range delete removing every bucket of ``side`` that starts before ``below`` (None: all)."""
    area = _SIDES[side]
    return area.range() if below is None else area.below(below)
