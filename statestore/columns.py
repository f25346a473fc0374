"""Writes and reads of a store as Arrow columns, for operators that work a batch at a time.

``Store.write(puts, deletes, ...)`` takes Python lists of ``bytes``: an operator that computes
its state changes column-wise would build a list of pairs only for the store to take them apart
again. ``ColumnWrite`` carries a write as three binary arrays instead, and the store
contract's column-wise methods (``Store.write_columns``, ``Store.multi_get_column``,
``Store.scan_prefixes_columns``, ``Store.scan_columns``) take and give Arrow arrays. Every backend has them: the
defaults convert to and from the row-wise primitives, and a backend that holds its state as
columns (the arranged store) serves them without a Python object per entry.

A write may also come as a file already written (``ColumnWrite.file``, a ``SourceFile``):
a changelogged store's delta holds the same entries as a run of the arranged store's layout,
so that store links or copies the delta file as its run instead of encoding the write again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.errors import StoreWriteError
from streamjoin.statestore.keysort import sort_order

__all__ = ["ColumnWrite", "SourceFile", "PrefixScan", "binary_column", "check_ranges", "binary_suffixes", "pair_chunks", "strictly_ascending",
           "Chunk"]

KeyValue = tuple[bytes, bytes]

#: ``(keys, values)``: two binary (or large binary) arrays of one length, keys strictly ascending.
Chunk = tuple[pa.Array, pa.Array]

#: Entries and bytes of keys and values a chunk of :func:`pair_chunks` holds at most.
CHUNK_ROWS = 65536
CHUNK_BYTES = 8 << 20


def pair_chunks(items: Iterable[KeyValue], size: int = CHUNK_ROWS, max_bytes: int = CHUNK_BYTES) -> Iterator[Chunk]:
    """Group (key, value) pairs into (keys, values) large binary arrays of up to ``size`` entries
    and (beyond the first entry) up to ``max_bytes`` bytes of keys and values, in the order given."""
    keys: list[bytes] = []
    values: list[bytes] = []
    pending = 0
    for key, value in items:
        if keys and (len(keys) == size or pending + len(key) + len(value) > max_bytes):
            yield pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())
            keys, values, pending = [], [], 0
        keys.append(key)
        values.append(value)
        pending += len(key) + len(value)
    if keys:
        yield pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())


def binary_column(values: pa.Array | pa.ChunkedArray | Sequence[bytes], what: str = "keys") -> pa.Array:
    """``values`` as one ``binary`` array (a list of ``bytes``, or a binary-like Arrow array);
    ``StoreWriteError`` for another type or a null."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        try:
            values = pa.array(values, pa.binary())
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
            raise StoreWriteError(f"{what} must be bytes: {exc}") from exc
    kind = values.type
    if not (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)):
        raise StoreWriteError(f"{what} must be a binary column, not {kind}")
    if values.null_count:
        raise StoreWriteError(f"{what} hold {values.null_count} null(s); every key and value must be bytes")
    return values if kind == pa.binary() else values.cast(pa.binary())


@dataclass(frozen=True)
class SourceFile:
    """An Arrow IPC file of ``key`` and ``value`` columns, whole: its bytes (checked against
    ``crc``, its CRC-32, by whoever read or wrote them) and its path on this machine's disk where
    it has one (None: it is elsewhere, or only in memory). A restore's snapshot is one (its rows
    the sorted chunks read from it, ``streamjoin.statestore.chunks``), and so is a changelog's
    delta of a column write (its rows the write's range deletes, then its deletes, a null value,
    then its puts; ``ColumnWrite.file``: its ``op`` column tells the range deletes, op 2, from
    the rest). Other columns of the file are not part of it."""

    data: pa.Buffer
    crc: int
    path: str | None = None


def check_ranges(ranges: Sequence[tuple[bytes, bytes]], where: str = "") -> None:
    """``StoreWriteError`` (its message after ``where``) for a range delete that is not a pair of bytes."""
    for entry in ranges:
        if len(entry) != 2 or type(entry[0]) is not bytes or type(entry[1]) is not bytes:
            raise StoreWriteError(f"{where}range deletes must be (bytes, bytes), got {entry!r}")


@dataclass(frozen=True)
class ColumnWrite:
    """One atomic write as columns: range deletes (``delete_ranges``, each ``[start, end)``), then
    deletes (``delete_keys``), then puts (``put_keys[i] -> put_values[i]``; of a key put twice the
    last value wins), as ``Store.write`` applies them. Build it with ``ColumnWrite.of``, which
    checks the types."""

    put_keys: pa.Array
    put_values: pa.Array
    delete_keys: pa.Array
    #: The same write as a file already written (None: none): its ``key`` and ``value`` columns
    #: are the range deletes (start and end, rows whose ``op`` column is 2), then ``delete_keys``
    #: with null values, then the puts, in this order (a changelog's delta,
    #: ``streamjoin.changelog.ChangeloggingStore``); a store that keeps writes as files of that
    #: layout may take it as its own (the arranged store's run) instead of writing them again.
    file: SourceFile | None = None
    #: Range deletes ``[start, end)``, applied before the deletes and puts, as ``Store.write`` takes them.
    delete_ranges: tuple[tuple[bytes, bytes], ...] = ()

    @classmethod
    def of(cls, put_keys: pa.Array | Sequence[bytes] = (), put_values: pa.Array | Sequence[bytes] = (),
           delete_keys: pa.Array | Sequence[bytes] = (),
           delete_ranges: Sequence[tuple[bytes, bytes]] = ()) -> ColumnWrite:
        """A checked write (binary arrays without nulls, as many values as put keys; range
        deletes as pairs of bytes)."""
        keys, values = binary_column(put_keys, "put keys"), binary_column(put_values, "put values")
        if len(keys) != len(values):
            raise StoreWriteError(f"a column write has {len(keys)} put keys but {len(values)} put values")
        check_ranges(delete_ranges)
        return cls(keys, values, binary_column(delete_keys, "delete keys"), delete_ranges=tuple(delete_ranges))

    @classmethod
    def of_lists(cls, puts: Sequence[KeyValue], deletes: Sequence[bytes] = (),
                 delete_ranges: Sequence[tuple[bytes, bytes]] = ()) -> ColumnWrite:
        """The write of ``Store.write(puts, deletes, delete_ranges)``."""
        return cls.of([k for k, _ in puts], [v for _, v in puts], deletes, delete_ranges)

    @property
    def entries(self) -> int:
        return len(self.put_keys) + len(self.delete_keys) + len(self.delete_ranges)

    def as_lists(self) -> tuple[list[KeyValue], list[bytes]]:
        """``(puts, deletes)`` as ``Store.write`` takes them (the range deletes are ``delete_ranges``)."""
        return list(zip(self.put_keys.to_pylist(), self.put_values.to_pylist())), self.delete_keys.to_pylist()

    def plus(self, other: ColumnWrite) -> ColumnWrite:
        """This write followed by ``other`` (both as one): deletes of both, then puts of both.
        Only for writes whose keys do not meet (a delete of one is never a put of the other),
        and where only the first has range deletes."""
        return ColumnWrite.concat([self, other])

    @classmethod
    def concat(cls, writes: Sequence[ColumnWrite]) -> ColumnWrite:
        """``writes[0].plus(writes[1]).plus(...)`` with each column concatenated once (a version's
        row bytes copied once, not once a part). Range deletes apply before every delete and put
        of the result, so only the first write may have them (``ValueError`` otherwise)."""
        if len(writes) == 1:
            return writes[0]
        if any(w.delete_ranges for w in writes[1:]):
            raise ValueError("ColumnWrite.concat: only the first write may have range deletes "
                             "(they apply before every put of the concatenated write)")
        return cls(pa.concat_arrays([w.put_keys for w in writes]), pa.concat_arrays([w.put_values for w in writes]),
                   pa.concat_arrays([w.delete_keys for w in writes]), delete_ranges=writes[0].delete_ranges)

    def sorted(self) -> ColumnWrite:
        """The same write with puts and deletes each in key order (one put per key: the last):
        equal writes then have equal bytes, whatever order their entries were computed in. A
        write whose puts and deletes already ascend strictly (one pass of comparisons; a step
        that builds its writes in key order, parts concatenated in key order) is itself."""
        keys, values = self.put_keys, self.put_values
        n = len(keys)
        if n > 1 and not strictly_ascending(keys):
            order = sort_order(keys)   # a stable sort: equal keys keep their order
            ordered = keys.take(pa.array(order))
            last = np.ones(n, bool)   # of equal keys the last put wins
            last[:-1] = pc.not_equal(ordered.slice(1), ordered.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            at = pa.array(order[last])
            keys, values = keys.take(at), values.take(at)
        deletes = self.delete_keys
        if len(deletes) > 1 and not strictly_ascending(deletes):
            deletes = pc.unique(deletes.take(pa.array(sort_order(deletes), pa.int64())))
        if keys is self.put_keys and deletes is self.delete_keys:
            return self
        return ColumnWrite(keys, values, deletes, delete_ranges=self.delete_ranges)


@dataclass(frozen=True)
class PrefixScan:
    """What ``Store.scan_prefixes_columns`` found: ``counts[i]`` entries under prefix ``i``, the
    entries of all prefixes flattened in the order the prefixes were given (each prefix's in key
    order) as ``keys`` and ``values``."""

    counts: np.ndarray
    keys: pa.Array
    values: pa.Array

    @classmethod
    def of_lists(cls, found: Sequence[Sequence[KeyValue]]) -> PrefixScan:
        counts = np.fromiter(map(len, found), np.int64, len(found))
        keys = [k for entries in found for k, _ in entries]
        values = [v for entries in found for _, v in entries]
        return cls(counts, pa.array(keys, pa.binary()), pa.array(values, pa.binary()))


def strictly_ascending(keys: pa.Array) -> bool:
    """Whether binary ``keys`` (no nulls) ascend strictly (one pass of comparisons in Arrow)."""
    n = len(keys)
    return n < 2 or not pc.any(pc.less_equal(keys.slice(1), keys.slice(0, n - 1))).as_py()


def binary_suffixes(values: pa.Array, cuts: np.ndarray) -> pa.Array:
    """``values[i][cuts[i]:]`` for every ``i``, as a ``binary`` array (one gather of the bytes in
    numpy; ``values`` binary without nulls, every cut at most its value's length)."""
    n = len(values)
    if not n:
        return pa.array([], pa.binary())
    values = values.cast(pa.large_binary())
    offsets = np.frombuffer(values.buffers()[1], np.int64, n + 1, values.offset * 8)
    data = values.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(0, np.uint8)
    starts = offsets[:-1] + cuts
    lengths = offsets[1:] - starts
    out = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=out[1:])
    gathered = data[np.repeat(starts - out[:-1], lengths) + np.arange(int(out[-1]))]
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(out), pa.py_buffer(gathered)]
                                            ).cast(pa.binary())
