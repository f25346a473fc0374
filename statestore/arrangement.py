"""An arrangement: an immutable sorted ``bytes -> bytes`` map held as columns, probed a batch at a time.

Two aligned numpy columns and a log of values:

* ``ekeys``: a fixed-width byte array (dtype ``S<width + 4>``) of the keys in an order-preserving
  form (``encode_keys``), sorted ascending: one ``np.searchsorted`` finds a whole batch of
  keys, or the bounds of a whole batch of ranges, in C, with no Python per key; the keys
  themselves are read back from it (``decode_keys``);
* ``rows``: each key's row id in ``log`` (``ValueLog``), an append-only list of Arrow
  ``large_binary`` chunks: a write appends its values as one chunk, and found entries are taken
  from the log (``take``) and turned into Python bytes once.

**The fixed-width form.** Each key is padded with zero bytes to the arrangement's width and
followed by its length (4 bytes, big-endian). Padded bytes first, then the length, sort exactly
as the keys' bytes do (a key before its extensions, the empty key first), and distinct keys have
distinct forms, which numpy compares byte by byte over the whole width. The forms are made in C
(numpy's conversion of a list of bytes; from an Arrow array, its data buffer seen as a matrix
where the keys are of one length, else Arrow's concatenation of each key, its zero padding and its length), with no
Python per key. A key longer than the width widens the arrangement that takes it.

**Codes.** An arrangement searched with many probes is searched by 64-bit codes of its keys
instead of their bytes (``streamjoin.statestore.keycodes``), made at that point and kept with it.

An arrangement never changes: ``Arrangement.applied`` returns a new one with a write's range
deletes, deletes and puts applied (in that order, as the store contract says), merging the sorted
puts into the kept entries in one pass over the two numpy columns; the values are not copied, only
appended. The log is rewritten (live values only, in key order) when its dead values outnumber the
live ones. The previous arrangement is untouched until the new one replaces it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import Any, Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.base import KeyValue
from streamjoin.statestore.keycodes import LazyIndex, search

__all__ = ["Arrangement", "ValueLog", "interleave", "encode_keys", "encode_clipped", "widen_keys", "decode_keys", "key_lengths", "ekeys_of",
           "data_size", "LENGTH_BYTES"]

#: Bytes of the length that follows a key's padded bytes.
LENGTH_BYTES = 4
#: A value log of at most this many chunks takes a chunk at a time by a mask of its rows; one of
#: more sorts the rows by chunk instead (a mask a chunk would cost more than the sort).
_MASKED_CHUNKS = 8


def encode_keys(keys: Sequence[bytes] | pa.Array, width: int | None = None) -> np.ndarray:
    """``keys`` in the fixed-width form (see module) at ``width`` (None: the longest key's), as an
    ``S<width + 4>`` array; ``ValueError`` for a key longer than ``width``."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return _encode_arrow(keys, width)
    n = len(keys)
    lengths = np.fromiter(map(len, keys), np.int64, n)
    width = _width(lengths, width)
    if not n:
        return np.zeros(0, f"S{width + LENGTH_BYTES}")
    padded = np.array(keys, dtype=f"S{max(width, 1)}").view(np.uint8).reshape(n, max(width, 1))[:, :width]
    return _with_lengths(padded, lengths)


def widen_keys(ekeys: np.ndarray, width: int) -> np.ndarray:
    """Keys in the fixed-width form re-encoded at ``width``, at least theirs: more zero padding
    before each key's length (the same order; no key is decoded)."""
    size = ekeys.dtype.itemsize
    if width + LENGTH_BYTES == size:
        return ekeys
    if width + LENGTH_BYTES < size:
        raise ValueError(f"keys of width {size - LENGTH_BYTES} cannot be narrowed to {width}")
    n, old = len(ekeys), size - LENGTH_BYTES
    matrix = np.ascontiguousarray(ekeys).view(np.uint8).reshape(n, size)
    out = np.zeros((n, width + LENGTH_BYTES), np.uint8)
    out[:, :old] = matrix[:, :old]
    out[:, width:] = matrix[:, old:]
    return out.view(f"S{width + LENGTH_BYTES}").reshape(n)


def encode_clipped(keys: Sequence[bytes] | pa.Array, width: int) -> tuple[np.ndarray, np.ndarray]:
    """``keys`` in the fixed-width form at ``width``, a key longer than it cut to its first
    ``width`` bytes; and which keys were cut."""
    if not isinstance(keys, (pa.Array, pa.ChunkedArray)):
        keys = pa.array(keys, pa.binary())
    return _encode_arrow(keys, width, clip=True)


def _arrow_lengths(flat: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """The offsets and lengths of a ``large_binary`` array's values."""
    offsets = np.frombuffer(flat.buffers()[1], np.int64, len(flat) + 1, flat.offset * 8)
    return offsets, np.diff(offsets)


def _encode_arrow(keys: pa.Array | pa.ChunkedArray, width: int | None, clip: bool = False) -> Any:
    """``encode_keys`` of a binary Arrow array: a gather from its buffers; with ``clip``, also
    which keys were longer than ``width`` (cut to it)."""
    flat = (keys.combine_chunks() if isinstance(keys, pa.ChunkedArray) else keys).cast(pa.large_binary())
    n = len(flat)
    if not n:
        empty = np.zeros(0, f"S{_width(np.zeros(0, np.int64), width) + LENGTH_BYTES}")
        return (empty, np.zeros(0, bool)) if clip else empty
    offsets, lengths = _arrow_lengths(flat)
    uniform = lengths.min() == lengths.max()
    longer = None
    if clip:
        assert width is not None
        longer = lengths > width
        lengths = np.minimum(lengths, width)
    width = _width(lengths, width)
    data = flat.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    if uniform:
        # keys of one length (a key of fixed-size parts): their bytes are already a matrix
        size, stride = int(lengths[0]), int(offsets[1] - offsets[0])
        out = np.zeros((n, width + LENGTH_BYTES), np.uint8)
        if size:
            out[:, :size] = data[offsets[0]:offsets[0] + n * stride].reshape(n, stride)[:, :size]
        out[:, width:] = np.frombuffer(np.array(size, ">u4").tobytes(), np.uint8)
        encoded = out.view(f"S{width + LENGTH_BYTES}").reshape(n)
        return (encoded, longer) if clip else encoded
    # keys of several lengths: Arrow appends to each its zero padding and its length, which makes
    # every value ``width + LENGTH_BYTES`` bytes long, so the joined values' bytes are the matrix
    if longer is not None and longer.any():
        flat = pc.binary_slice(flat, 0, width)
    pads = _zero_pads(width).take(pa.array(width - lengths))
    suffix = np.ascontiguousarray(lengths.astype(">u4")).view(np.uint8)
    sizes = pa.FixedSizeBinaryArray.from_buffers(pa.binary(LENGTH_BYTES), n, [None, pa.py_buffer(suffix)])
    joined = pc.binary_join_element_wise(flat, pads, sizes.cast(pa.large_binary()), _NO_SEPARATOR)
    size = width + LENGTH_BYTES
    first = int(np.frombuffer(joined.buffers()[1], np.int64, 1, joined.offset * 8)[0])
    encoded = np.frombuffer(joined.buffers()[2], f"S{size}", n, first).copy()
    return (encoded, longer) if clip else encoded


_NO_SEPARATOR = pa.scalar(b"", pa.large_binary())


@lru_cache(maxsize=64)
def _zero_pads(width: int) -> pa.Array:
    """``[b"", b"\\0", ..., b"\\0" * width]`` as a ``large_binary`` array: the padding of a key of
    each length to ``width``."""
    return pa.array([bytes(k) for k in range(width + 1)], pa.large_binary())


def _width(lengths: np.ndarray, width: int | None) -> int:
    longest = int(lengths.max()) if len(lengths) else 0
    if width is None:
        return longest
    if longest > width:
        raise ValueError(f"a key of {longest} bytes does not fit a width of {width}")
    return width


def _with_lengths(padded: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Rows of padded key bytes, each followed by its key's length, as ``S`` values."""
    n, width = padded.shape
    out = np.empty((n, width + LENGTH_BYTES), np.uint8)
    out[:, :width] = padded
    out[:, width:] = lengths.astype(">u4").view(np.uint8).reshape(n, LENGTH_BYTES)
    return out.view(f"S{width + LENGTH_BYTES}").reshape(n)


def ekeys_of(column: pa.Array) -> np.ndarray:
    """A ``fixed_size_binary`` column of ``Arrangement.columns`` as an ``S`` array (no copy)."""
    column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    size = column.type.byte_width
    if not len(column):
        return np.zeros(0, f"S{size}")
    return np.frombuffer(column.buffers()[1], dtype=f"S{size}", count=len(column), offset=column.offset * size)


def key_lengths(ekeys: np.ndarray) -> np.ndarray:
    """The lengths of the keys of encoded ones (their 4-byte suffix), as int64."""
    n = len(ekeys)
    if not n:
        return np.zeros(0, np.int64)
    size = ekeys.dtype.itemsize
    whole = np.ascontiguousarray(ekeys)   # (each key's suffix read in place: no copy of the matrix's columns)
    suffixes = np.ndarray((n,), dtype=">u4", buffer=whole.data, offset=size - LENGTH_BYTES, strides=(size,))
    return suffixes.astype(np.int64)


def decode_keys(ekeys: np.ndarray) -> pa.Array:
    """The keys of encoded ones, as a ``large_binary`` array (a gather of their bytes in C)."""
    n = len(ekeys)
    size = ekeys.dtype.itemsize
    matrix = np.ascontiguousarray(ekeys).view(np.uint8).reshape(n, size)
    lengths = key_lengths(ekeys)
    offsets = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if n and lengths.min() == lengths.max():   # keys of one length: a slice of the matrix
        data = np.ascontiguousarray(matrix[:, :int(lengths[0])])
    else:
        data = matrix[:, :size - LENGTH_BYTES][np.arange(size - LENGTH_BYTES)[None, :] < lengths[:, None]]
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


@dataclass(frozen=True)
class ValueLog:
    """Values by row id: ``chunks[i]`` holds rows ``starts[i]`` to ``starts[i + 1]``."""

    chunks: tuple[pa.Array, ...] = ()
    starts: tuple[int, ...] = (0,)

    def __len__(self) -> int:
        return self.starts[-1]

    def appended(self, values: pa.Array) -> ValueLog:
        """This log with ``values`` (large binary) after its rows."""
        if not len(values):
            return self
        return ValueLog((*self.chunks, values), (*self.starts, self.starts[-1] + len(values)))

    def slice(self, start: int, length: int) -> pa.Array:
        """The values of rows ``start`` to ``start + length`` (large binary; no gather: the
        chunks' slices, concatenated where the rows span more than one)."""
        first = int(np.searchsorted(np.asarray(self.starts), start, side="right")) - 1
        pieces: list[pa.Array] = []
        at, left = start, length
        while left > 0:
            chunk = self.chunks[first]
            piece = chunk.slice(at - self.starts[first], min(left, self.starts[first + 1] - at))
            pieces.append(piece.cast(pa.large_binary()))
            at, left, first = at + len(piece), left - len(piece), first + 1
        if len(pieces) == 1:
            return pieces[0]
        return pa.concat_arrays(pieces) if pieces else pa.array([], pa.large_binary())

    def take(self, rows: np.ndarray) -> pa.Array:
        """The values of ``rows`` (row ids, -1: null), in that order."""
        if len(self.chunks) == 1:
            return self.chunks[0].take(pa.array(rows, pa.int64(), mask=rows < 0))
        if not len(rows):
            return pa.array([], pa.large_binary())
        chunk_of = np.searchsorted(np.asarray(self.starts), rows, side="right") - 1
        chunk_of[rows < 0] = -1
        if len(self.chunks) > _MASKED_CHUNKS:
            return self._take_sorted(rows, chunk_of)
        pieces: list[pa.Array] = []
        index = np.empty(len(rows), np.int64)
        done = 0
        for c in range(-1, len(self.chunks)):   # one take a chunk (a mask each: a log has few chunks)
            where = np.flatnonzero(chunk_of == c)
            if not len(where):
                continue
            pieces.append(pa.nulls(len(where), pa.large_binary()) if c < 0 else
                          self.chunks[c].take(pa.array(rows[where] - self.starts[c], pa.int64())))
            index[where] = done + np.arange(len(where))
            done += len(where)
        gathered = pa.concat_arrays([piece.cast(pa.large_binary()) for piece in pieces])
        return gathered if len(pieces) == 1 and index[-1] == len(index) - 1 and bool((np.diff(index) == 1).all()) \
            else gathered.take(pa.array(index, pa.int64()))

    def _take_sorted(self, rows: np.ndarray, chunk_of: np.ndarray) -> pa.Array:
        """``take`` of a log of many chunks: the rows sorted by chunk, one take a chunk."""
        # (chunk numbers as 16-bit integers, -1 the nulls': numpy sorts them stably by radix)
        at = np.argsort(chunk_of.astype(np.int16) if len(self.chunks) < 1 << 15 else chunk_of, kind="stable")
        cuts = np.flatnonzero(np.diff(chunk_of[at])) + 1
        out = [pa.nulls(len(where), pa.large_binary()) if chunk_of[where[0]] < 0 else
               self.chunks[chunk_of[where[0]]].take(pa.array(rows[where] - self.starts[chunk_of[where[0]]], pa.int64()))
               for where in np.split(at, cuts)]
        gathered = pa.concat_arrays([piece.cast(pa.large_binary()) for piece in out])
        back = np.empty(len(rows), np.int64)
        back[at] = np.arange(len(rows))
        return gathered.take(pa.array(back, pa.int64()))

    def sizes(self, rows: np.ndarray) -> int:
        """The bytes of the values of ``rows``."""
        return int(self.lengths(rows)[1].sum())

    def lengths(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per row of ``rows`` (row ids), whether its value is not null and its bytes (0 for a
        null), read from the chunks' offsets and validity without gathering the values."""
        valid = np.ones(len(rows), bool)
        lengths = np.zeros(len(rows), np.int64)
        chunk_of = np.searchsorted(np.asarray(self.starts), rows, side="right") - 1
        for c in np.unique(chunk_of).tolist():
            chunk = self.chunks[c]
            where = np.flatnonzero(chunk_of == c)
            local = rows[where] - self.starts[c]
            offsets = np.frombuffer(chunk.buffers()[1], np.int64, len(chunk) + 1, chunk.offset * 8)
            lengths[where] = offsets[local + 1] - offsets[local]
            if chunk.null_count:
                valid[where] = np.asarray(chunk.is_valid())[local]
        lengths[~valid] = 0   # a null's offsets need not be equal
        return valid, lengths


@dataclass(frozen=True)
class Arrangement:
    """A sorted map of unique keys (see module); build with ``empty``, ``from_sorted`` or
    ``from_columns``, change with ``applied``."""

    ekeys: np.ndarray
    rows: np.ndarray
    log: ValueLog
    #: bytes of the keys and values held (what the store contract's stats count)
    nbytes: int = 0
    #: entries whose value is null (a layered store's tombstones), and their keys' bytes: kept
    #: as writes change them, so a store's size needs no pass over its entries
    nulls: int = 0
    null_key_bytes: int = 0

    @classmethod
    def empty(cls) -> Arrangement:
        return cls(np.zeros(0, f"S{LENGTH_BYTES}"), np.zeros(0, np.int64), ValueLog())

    @classmethod
    def from_sorted(cls, keys: Sequence[bytes], values: Sequence[bytes]) -> Arrangement:
        """From strictly ascending ``keys`` and their ``values`` (the caller checked the order)."""
        return cls.from_columns(encode_keys(keys), pa.array(values, pa.large_binary()))

    @classmethod
    def from_columns(cls, ekeys: np.ndarray, values: pa.Array) -> Arrangement:
        """From encoded keys in order and their values (e.g. a table of ``columns`` read
        back): no encoding, no sort, no copy."""
        values = values.cast(pa.large_binary())
        rows = np.arange(len(ekeys), dtype=np.int64)
        nulls, null_key_bytes = _nulls(ekeys, values)
        return cls(ekeys, rows, ValueLog().appended(values), int(key_lengths(ekeys).sum()) + data_size(values),
                   nulls, null_key_bytes)

    def __len__(self) -> int:
        return len(self.ekeys)

    @property
    def width(self) -> int:
        return self.ekeys.dtype.itemsize - LENGTH_BYTES

    def widened(self, width: int) -> Arrangement:
        """This arrangement with keys encoded at ``width`` (at least the current width)."""
        if width <= self.width:
            return self
        return replace(self, ekeys=widen_keys(self.ekeys, width))

    def _encoded(self, keys: Sequence[bytes] | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(this arrangement's encoded keys, ``keys`` encoded) at one width."""
        longest = _longest(keys)
        mine = self.widened(longest).ekeys
        return mine, encode_keys(keys, mine.dtype.itemsize - LENGTH_BYTES)

    @cached_property
    def _index(self) -> LazyIndex:
        """The keys' 64-bit codes (``streamjoin.statestore.keycodes``), made once this
        arrangement's searches have paid for them (8 bytes a key)."""
        return LazyIndex(self.ekeys)

    def _search(self, mine: np.ndarray, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
        """``search(mine, theirs, side)`` of this arrangement's keys ``mine`` (widened or not):
        by their codes where ``mine`` is this arrangement's own column and they are made."""
        if mine is not self.ekeys or not len(mine):
            return search(mine, theirs, side)
        return self._index.search(theirs, side)

    # -- reads ------------------------------------------------------------------------------------

    def find(self, keys: Sequence[bytes] | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """For each key, its position (where it is, or would be inserted) and whether it is there."""
        mine, theirs = self._encoded(keys)
        at = self._search(mine, theirs)
        found = np.zeros(len(theirs), bool)
        inside = at < len(mine)
        found[inside] = mine[at[inside]] == theirs[inside]
        return at, found

    def get_many(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The value of each of ``keys`` (None: absent), in the order given."""
        if not keys or not len(self):
            return [None] * len(keys)
        at, found = self.find(keys)
        return self.log.take(np.where(found, self.rows[np.minimum(at, len(self) - 1)], -1)).to_pylist()

    def get_column(self, keys: pa.Array) -> pa.Array:
        """The value of each of ``keys`` (a binary array) as a binary array, null where absent."""
        if not len(keys) or not len(self):
            return pa.nulls(len(keys), pa.binary())
        at, found = self.find(keys)
        return self.log.take(np.where(found, self.rows[np.minimum(at, len(self) - 1)], -1)).cast(pa.binary())

    def bounds(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> tuple[np.ndarray, np.ndarray]:
        """Per ``[start, end)`` range (None: unbounded), the positions ``lo, hi`` of its entries."""
        lo = np.zeros(len(ranges), np.int64)
        hi = np.full(len(ranges), len(self), np.int64)
        for side, out in ((0, lo), (1, hi)):
            where = [i for i, r in enumerate(ranges) if r[side] is not None]
            if where:
                mine, theirs = self._encoded([ranges[i][side] for i in where])
                out[where] = np.searchsorted(mine, theirs)
        return lo, np.maximum(hi, lo)

    def prefix_bounds(self, prefixes: Sequence[bytes] | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Per prefix, the positions ``lo, hi`` of the keys that start with it: from the prefix's
        own form (padded with zero bytes) to the form with every byte past it ``\\xff``."""
        mine, theirs = self._encoded(prefixes)
        lo = self._search(mine, theirs)
        size = theirs.dtype.itemsize
        upper = theirs.view(np.uint8).reshape(len(theirs), size).copy()
        upper[np.arange(size)[None, :] >= key_lengths(theirs)[:, None]] = 0xFF
        hi = self._search(mine, upper.view(f"S{size}").reshape(len(theirs)), side="right")
        return lo, np.maximum(hi, lo)

    def entries(self, lo: int, hi: int) -> list[KeyValue]:
        """The entries at positions ``lo`` to ``hi`` (exclusive), in key order."""
        if hi <= lo:
            return []
        return self._pairs(np.arange(lo, hi))

    def _pairs(self, at: np.ndarray) -> list[KeyValue]:
        """The entries at positions ``at`` as (key, value) pairs."""
        return list(zip(decode_keys(self.ekeys[at]).to_pylist(), self.log.take(self.rows[at]).to_pylist()))

    def scan_ranges(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> list[list[KeyValue]]:
        """The entries of each range, one list per range in the order given (see ``bounds``)."""
        return self._gathered(*self.bounds(ranges))

    def scan_prefixes(self, prefixes: Sequence[bytes]) -> list[list[KeyValue]]:
        """The entries under each prefix, one list per prefix in the order given."""
        return self._gathered(*self.prefix_bounds(prefixes))

    def scan_prefix_columns(self, prefixes: pa.Array) -> tuple[np.ndarray, pa.Array, pa.Array]:
        """The entries under each prefix (a binary array): per prefix their count, and the entries
        of all prefixes, in the order given, as binary key and value arrays."""
        lo, hi = self.prefix_bounds(prefixes) if len(self) and len(prefixes) else \
            (np.zeros(len(prefixes), np.int64), np.zeros(len(prefixes), np.int64))
        counts = hi - lo
        total = int(counts.sum())
        at = np.repeat(lo - (np.cumsum(counts) - counts), counts) + np.arange(total)
        return (counts, decode_keys(self.ekeys[at]).cast(pa.binary()),
                self.log.take(self.rows[at]).cast(pa.binary()))

    def _gathered(self, lo: np.ndarray, hi: np.ndarray) -> list[list[KeyValue]]:
        """The entries of positions ``lo[i]`` to ``hi[i]``, one list per ``i``: one gather of each column."""
        counts = hi - lo
        total = int(counts.sum())
        if not total:
            return [[] for _ in range(len(lo))]
        starts = np.cumsum(counts) - counts
        pairs = self._pairs(np.repeat(lo - starts, counts) + np.arange(total))
        return [pairs[s:e] for s, e in zip(starts.tolist(), (starts + counts).tolist())]

    # -- writes -----------------------------------------------------------------------------------

    def applied(
        self,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes] = (),
        delete_ranges: Sequence[tuple[bytes, bytes]] = (),
    ) -> Arrangement:
        """A new arrangement: this one with ``delete_ranges``, then ``deletes``, then ``puts``
        applied (a key put twice keeps its last value)."""
        return self.applied_columns(pa.array([k for k, _ in puts], pa.binary()),
                                    pa.array([v for _, v in puts], pa.binary()),
                                    pa.array(deletes, pa.binary()), delete_ranges)

    def applied_columns(self, put_keys: pa.Array, put_values: pa.Array, deletes: pa.Array,
                        delete_ranges: Sequence[tuple[bytes, bytes]] = ()) -> Arrangement:
        """``applied`` of binary columns: ``put_keys[i] -> put_values[i]``, ``deletes``."""
        n = len(self)
        keep = np.ones(n, bool)
        if delete_ranges and n:
            lo, hi = self.bounds(list(delete_ranges))
            for a, b in zip(lo.tolist(), hi.tolist()):
                keep[a:b] = False
        if len(deletes) and n:
            at, found = self.find(deletes)
            keep[at[found]] = False
        if not len(put_keys):
            return self if keep.all() else self._kept(keep, self.ekeys[keep], self.rows[keep], self.log, 0, (0, 0))
        mine, theirs = self._encoded(put_keys)
        in_order = len(theirs) < 2 or bool((theirs[1:] > theirs[:-1]).all())
        if in_order:                            # a sorted write (a changelogged one's): no sort
            order = np.arange(len(theirs))
        else:
            order = np.argsort(theirs, kind="stable")
            theirs = theirs[order]
            last = np.ones(len(order), bool)    # of equal keys the last put wins
            last[:-1] = theirs[1:] != theirs[:-1]
            order, theirs = order[last], theirs[last]
        at = np.searchsorted(mine, theirs) if n else np.zeros(len(theirs), np.int64)
        if n:
            inside = at < n
            found = np.zeros(len(theirs), bool)
            found[inside] = mine[at[inside]] == theirs[inside]
            keep[at[found]] = False
        kept = mine[keep]
        # a put's place among the kept keys: the kept keys before its place among all of them
        # (a put's own old entry, at its place, is not kept); no second search
        before = np.zeros(n + 1, np.int64)
        np.cumsum(keep, out=before[1:])
        slots = before[at] + np.arange(len(theirs))
        ekeys, is_put = interleave(slots, theirs, kept)
        values = (put_values if in_order else put_values.take(pa.array(order))).cast(pa.large_binary())
        rows = np.empty(len(ekeys), np.int64)
        rows[slots] = len(self.log) + np.arange(len(order))
        rows[~is_put] = self.rows[keep]
        added = int(key_lengths(theirs).sum())
        return self._kept(keep, ekeys, rows, self.log.appended(values), added + data_size(values),
                          _nulls(theirs, values))

    def _kept(self, keep: np.ndarray, ekeys: np.ndarray, rows: np.ndarray, log: ValueLog, added: int,
              added_nulls: tuple[int, int]) -> Arrangement:
        """The new arrangement, its byte count moved by what ``keep`` drops and ``added``, its
        nulls by what it drops and ``added_nulls`` (count, key bytes); the log rewritten (live
        rows only, in key order) once most of it is dead. Reads only the dropped entries."""
        gone = np.flatnonzero(~keep)
        removed = removed_nulls = removed_null_keys = 0
        if len(gone):
            valid, lengths = self.log.lengths(self.rows[gone])
            keys = key_lengths(self.ekeys[gone])
            removed = int(keys.sum()) + int(lengths.sum())
            removed_nulls, removed_null_keys = int((~valid).sum()), int(keys[~valid].sum())
        if len(log) > 2 * len(rows) + 1024:
            log, rows = ValueLog().appended(log.take(rows)), np.arange(len(rows), dtype=np.int64)
        return Arrangement(ekeys, rows, log, self.nbytes - removed + added, self.nulls - removed_nulls + added_nulls[0],
                           self.null_key_bytes - removed_null_keys + added_nulls[1])

    def columns(self) -> pa.Table:
        """The arrangement as a table (``ekey`` fixed-size binary, ``value``) in key order, which
        ``from_columns`` reads back without encoding or sorting."""
        size = self.ekeys.dtype.itemsize
        data = np.ascontiguousarray(self.ekeys).view(np.uint8)
        ekeys = pa.FixedSizeBinaryArray.from_buffers(pa.binary(size), len(self), [None, pa.py_buffer(data)])
        log, rows = self.log, self.rows
        in_order = len(log.chunks) == 1 and len(log) == len(rows) and bool(np.array_equal(rows, np.arange(len(rows))))
        return pa.table({"ekey": ekeys, "value": log.chunks[0] if in_order else log.take(rows)})


def _longest(keys: Sequence[bytes] | pa.Array) -> int:
    """The length of the longest of ``keys`` (0: none)."""
    if isinstance(keys, (pa.Array, pa.ChunkedArray)):
        return int(pc.max(pc.binary_length(keys)).as_py() or 0) if len(keys) else 0
    return max(map(len, keys), default=0)


def _nulls(ekeys: np.ndarray, values: pa.Array) -> tuple[int, int]:
    """How many of ``values`` are null, and the bytes of their keys (``ekeys``, aligned)."""
    if not values.null_count:
        return 0, 0
    null = ~np.asarray(values.is_valid())
    return int(null.sum()), int(key_lengths(ekeys[null]).sum())


def data_size(array: pa.Array) -> int:
    """The bytes of a large binary array's values (without offsets)."""
    if not len(array):
        return 0
    offsets = np.frombuffer(array.buffers()[1], np.int64, len(array) + 1, array.offset * 8)
    return int(offsets[-1] - offsets[0])


def interleave(slots: np.ndarray, theirs: np.ndarray, mine: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A column of ``len(slots) + len(mine)`` values with ``theirs[i]`` at ``slots[i]`` and
    ``mine`` in order in the other places (the merge of two sorted columns whose places are known),
    and which places hold ``theirs``."""
    total = len(slots) + len(mine)
    from_theirs = np.zeros(total, bool)
    from_theirs[slots] = True
    out = np.empty(total, mine.dtype)
    out[slots] = theirs
    out[~from_theirs] = mine
    return out, from_theirs
