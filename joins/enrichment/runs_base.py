"""The base run of the enrichment's ``runs`` layout: held whole in memory, or read a chunk at a time.

A base run (:mod:`streamjoin.enrichment.runs`) is stored in *chunks* cut at key boundaries: each
chunk holds every version of its keys, about :data:`streamjoin.enrichment.runs.CHUNK_ROWS` rows
(more where one key has more versions), and the chunks follow each other in key code order. Its
:class:`ChunkIndex`, stored beside it, says each chunk's last key code, rows, oldest change time
and stored bytes, so the base's size, its oldest version and the chunks that hold a set of keys
are known without reading a chunk.

A :class:`Base` is held *whole* (one :class:`SortedVersions` in memory, its chunks slices of it)
when its stored bytes fit the partition's budget for it
(:func:`streamjoin.enrichment.runs.base_budget`, half its memory budget); else it keeps only its index, and a version
reads the chunks that hold the keys it touches (:meth:`Base.of_keys`), and a fold reads one chunk
at a time (:meth:`Base.chunks`). A version's memory then follows its own changes and events, and
the versions of their keys, not the size of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.enrichment.sorted_versions import Order, SortedVersions, common_codes, concat_codes
from streamjoin.runtime.operator import POS_INF

__all__ = ["ChunkIndex", "Base", "chunk_bounds"]


def chunk_bounds(order: Order, target: int) -> np.ndarray:
    """Where versions in version order (``order``) are cut into chunks of about ``target`` rows:
    ``[0, ..., len]``, each inner bound the first key start at or after a multiple of ``target``
    (so no key is cut)."""
    n = len(order)
    if n == 0:
        return np.zeros(1, np.int64)
    starts = np.flatnonzero(~order.same_key_as_previous())
    at = np.searchsorted(starts, np.arange(target, n, target), "left")
    return np.unique(np.r_[0, starts[at[at < starts.size]], n]).astype(np.int64)


@dataclass(frozen=True)
class ChunkIndex:
    """Each chunk's last key code (``lasts``), rows, oldest change time (``NEG_INF`` if it holds
    a timeless version) and stored bytes."""

    lasts: np.ndarray
    rows: np.ndarray
    oldest: np.ndarray
    nbytes: np.ndarray

    @classmethod
    def empty(cls) -> ChunkIndex:
        none = np.zeros(0, np.int64)
        return cls(none, none, none, none)

    @classmethod
    def of(cls, lasts: Sequence[np.ndarray], rows: Sequence[int], oldest: Sequence[int], nbytes: Sequence[int]
           ) -> ChunkIndex:
        """The index of chunks whose last key codes are ``lasts`` (one-code arrays, maybe of
        different widths), with ``rows``, ``oldest`` change times and stored ``nbytes``."""
        if not lasts:
            return cls.empty()
        return cls(concat_codes(lasts), np.asarray(rows, np.int64), np.asarray(oldest, np.int64), np.asarray(nbytes, np.int64))

    def __len__(self) -> int:
        return len(self.rows)

    def table(self) -> pa.Table:
        """The index as a table (to store)."""
        if self.lasts.dtype.kind == "S":
            last = pa.array(self.lasts.tolist(), pa.binary(self.lasts.dtype.itemsize))
        else:
            last = pa.array(self.lasts, pa.int64())
        return pa.table({"last": last, "rows": self.rows, "oldest": self.oldest, "bytes": self.nbytes})

    @classmethod
    def from_table(cls, table: pa.Table) -> ChunkIndex:
        """The index :meth:`table` stored."""
        last = table.column("last").combine_chunks()
        if pa.types.is_fixed_size_binary(last.type):
            lasts = np.array(last.to_pylist(), f"S{last.type.byte_width}")
        else:
            lasts = np.asarray(last.to_numpy(zero_copy_only=False), np.int64)

        def ints(name: str) -> np.ndarray:
            return np.asarray(table.column(name).to_numpy(), np.int64)
        return cls(lasts, ints("rows"), ints("oldest"), ints("bytes"))

    def starts(self) -> np.ndarray:
        """The first row of each chunk, and the base's length last."""
        return np.r_[0, np.cumsum(self.rows)].astype(np.int64)

    def owners(self, codes: np.ndarray) -> np.ndarray:
        """The chunk that holds (or would hold) each key code: the first whose last code is at
        or after it; a code after every chunk's belongs to the last one."""
        lasts, theirs = common_codes(self.lasts, codes)
        return np.minimum(np.searchsorted(lasts, theirs, "left"), len(self) - 1)


@dataclass(frozen=True)
class Base:
    """A base run: its ``index``, its versions ``whole`` when held in memory (else None), and how
    to read chunk ``i`` from the store (``load``); see module."""

    index: ChunkIndex
    whole: SortedVersions | None
    load: Callable[[int], SortedVersions]

    @classmethod
    def held(cls, whole: SortedVersions, index: ChunkIndex) -> Base:
        """A base held whole in memory."""
        return cls(index, whole, lambda i: _sliced(whole, index, i))

    def __len__(self) -> int:
        return int(self.index.rows.sum())

    @property
    def nbytes(self) -> int:
        """The bytes its chunks take in the store."""
        return int(self.index.nbytes.sum())

    def oldest(self) -> int:
        """The earliest change time held (``NEG_INF`` if a version is timeless; ``POS_INF``: none)."""
        return int(self.index.oldest.min()) if len(self.index) else POS_INF

    def of_keys(self, codes: np.ndarray, empty: SortedVersions) -> SortedVersions:
        """Versions in version order that include every version of the keys ``codes``: the whole
        base when it is held, else those keys' versions, read from the chunks that hold them
        (``empty``: none)."""
        if self.whole is not None:
            return self.whole
        if not len(self.index) or not codes.size:
            return empty
        parts = []
        for i in np.unique(self.index.owners(codes)).tolist():
            chunk = self.load(i)
            rows = chunk.rows_of(codes)
            if rows.size:
                parts.append(chunk.take(rows))
        return SortedVersions.joined(parts) if parts else empty

    def chunks(self) -> Iterator[SortedVersions]:
        """Its chunks in order, each read when asked for (slices of the whole when it is held)."""
        return (self.load(i) for i in range(len(self.index)))


def _sliced(whole: SortedVersions, index: ChunkIndex, i: int) -> SortedVersions:
    starts = index.starts()
    return whole.slice(int(starts[i]), int(starts[i + 1]))

