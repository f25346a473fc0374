"""How the LMDB backend lays entries out: checksummed records and buckets of long keys.

Byte-level functions (this module does not import lmdb), used by :mod:`streamjoin.statestore.lmdb`:

* every record LMDB holds for us is *sealed*: the value, then the CRC-32 of the record's LMDB key
  and the value (4 bytes, little-endian). CRC-32 over data followed by its own CRC gives a fixed
  residue, so checking a record is one CRC over key and record, no slicing or unpacking;
  :func:`unseal` and friends raise :class:`Damaged` on a mismatch, so a flipped bit in a key or a
  value is found when the record is read instead of changing a result;
* a key longer than :data:`SHORT_MAX` bytes lives in a *bucket*: one record keyed by the key's
  first :data:`SHORT_MAX` bytes, holding every stored key with that prefix as sorted
  ``(suffix, value)`` pairs (:func:`encode_bucket` / :func:`decode_bucket`).

and how that layout is read and bulk-loaded: :func:`short_items` and :func:`long_items` turn
cursors over the two entry databases into checked ``(key, value)`` streams within scan bounds, and
:class:`Loader` turns sorted input into records for sorted appends. A bulk load that arrives as
Arrow chunks (a restore) is sealed a chunk at a time by :func:`sealed_arrays`: the same records as
:func:`sealed` makes, built by Arrow kernels and one C-level pass of ``crc32`` over the chunk, with
no Python step per entry, so a restore checks and seals in bulk. The store, its transactions
and its errors live in :mod:`streamjoin.statestore.lmdb`.
"""

from __future__ import annotations

import struct
import sys
from array import array
from itertools import chain, dropwhile, takewhile
from operator import itemgetter
from typing import Any, Iterable, Iterator, Sequence
from zlib import crc32

import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.errors import StoreError, StreamjoinError

__all__ = [
    "SHORT_MAX", "Damaged", "seal", "sealed", "sealed_arrays", "unseal", "unsealed", "unseal_many",
    "encode_bucket", "decode_bucket", "all_short", "short_items", "long_items", "Loader", "Prepared", "Columns",
    "EMPTY_KEY",
]

KeyValue = tuple[bytes, bytes]
#: The ``meta`` record that holds the empty key's value (LMDB refuses empty keys).
EMPTY_KEY = b"empty-key"
_KEY = itemgetter(0)

#: The longest key stored as itself (LMDB's own limit is 511 bytes); longer keys go to buckets.
SHORT_MAX = 480

_CRC = struct.Struct("<I").pack
#: crc32(data + crc32(data) as 4 little-endian bytes) for every ``data``.
_RESIDUE = 0x2144DF1C
_LENGTHS = struct.Struct(">II")
#: An ``array`` type code of 4-byte unsigned ints, and whether its bytes must be swapped to make
#: the little-endian checksums of :func:`seal`.
_U32 = next(code for code in "IL" if array(code).itemsize == 4)
_SWAP = sys.byteorder != "little"
_BIN = pa.large_binary()
_JOIN = pa.scalar(b"", _BIN)  # binary_join_element_wise's separator: none
_CRC_TYPE = pa.binary(4)


class Damaged(StreamjoinError):
    """A record's checksum does not match its key and value (internal; the store reports it)."""

    def __init__(self, key: bytes) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        shown = self.key if len(self.key) <= 40 else self.key[:40] + b"..."
        return f"checksum mismatch in the record of key {shown!r} ({len(self.key)} bytes)"


def seal(key: bytes, value: bytes) -> bytes:
    """``value`` followed by its checksum (over ``key`` and ``value``)."""
    return value + _CRC(crc32(value, crc32(key)))


def sealed(pairs: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``[(key, seal(key, value)), ...]``; raises TypeError/ValueError for anything but pairs of
    bytes-like objects, before anything is written."""
    return [(key, value + _CRC(crc32(value, crc32(key)))) for key, value in pairs]


class Columns:
    """``(key, record)`` pairs held as two lists: iterating zips them, so no list of tuples is
    built (``putmulti`` drops each pair before taking the next, and ``zip`` reuses its tuple)."""

    __slots__ = ("keys", "records")

    def __init__(self, keys: list[bytes], records: list[bytes]) -> None:
        self.keys, self.records = keys, records

    def __iter__(self) -> Iterator[KeyValue]:
        return zip(self.keys, self.records)

    def __len__(self) -> int:
        return len(self.keys)


def sealed_arrays(keys: pa.Array, values: pa.Array) -> Columns:
    """What :func:`sealed` makes of ``zip(keys, values)``, for binary Arrow arrays of one length.

    Per chunk: Arrow joins each key to its value, ``crc32`` runs over the joined entries in one
    C-level ``map``, and Arrow appends each checksum to its value; only the keys and the sealed
    values become Python objects. Raises TypeError for arrays that are not binary or hold nulls.
    """
    if not (_is_binary(keys) and _is_binary(values)):
        raise TypeError(f"a put needs (bytes, bytes), got arrays of {keys.type} and {values.type}")
    if keys.null_count or values.null_count:
        raise TypeError("a put needs (bytes, bytes), got a null key or value")
    if len(keys) != len(values):
        raise ValueError(f"{len(keys)} keys but {len(values)} values")
    if not len(keys):
        return Columns([], [])
    keys, values = keys.cast(_BIN), values.cast(_BIN)
    crcs = array(_U32, map(crc32, pc.binary_join_element_wise(keys, values, _JOIN).to_pylist()))
    if _SWAP:
        crcs.byteswap()
    tails = pa.FixedSizeBinaryArray.from_buffers(_CRC_TYPE, len(crcs), [None, pa.py_buffer(crcs)])
    records = pc.binary_join_element_wise(values, tails.cast(_BIN), _JOIN)
    return Columns(keys.to_pylist(), records.to_pylist())


def _damaged(key: bytes) -> bool:
    raise Damaged(key)


def unseal(key: bytes, record: bytes) -> bytes:
    """The value sealed in ``record`` under ``key``; raises :class:`Damaged` if the check fails."""
    if crc32(record, crc32(key)) != _RESIDUE:
        raise Damaged(key)
    return record[:-4]


def unsealed(items: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    """``(key, value)`` for each ``(key, record)``, checked (the check stays inline, in C calls)."""
    return ((k, r[:-4]) for k, r in items if crc32(r, crc32(k)) == _RESIDUE or _damaged(k))


def unseal_many(keys: Sequence[bytes], records: Sequence[bytes | None]) -> list[bytes | None]:
    """Values of ``records`` (None stays None), each checked against its key."""
    return [
        None if r is None else r[:-4]
        for k, r in zip(keys, records)
        if r is None or crc32(r, crc32(k)) == _RESIDUE or _damaged(k)
    ]


def encode_bucket(entries: Sequence[tuple[bytes, bytes]]) -> bytes:
    """Sorted ``(suffix, value)`` pairs as one record body."""
    parts: list[bytes] = []
    for suffix, value in entries:
        parts += (_LENGTHS.pack(len(suffix), len(value)), suffix, value)
    return b"".join(parts)


def decode_bucket(prefix: bytes, body: bytes) -> list[tuple[bytes, bytes]]:
    """Inverse of :func:`encode_bucket`; raises :class:`Damaged` for a body it cannot make."""
    entries: list[tuple[bytes, bytes]] = []
    pos, size = 0, len(body)
    try:
        while pos < size:
            suffix_len, value_len = _LENGTHS.unpack_from(body, pos)
            pos += 8
            suffix = body[pos : pos + suffix_len]
            pos += suffix_len
            entries.append((suffix, body[pos : pos + value_len]))
            pos += value_len
    except struct.error:
        raise Damaged(prefix) from None
    if pos != size:
        raise Damaged(prefix)
    return entries


def all_short(keys: Sequence[bytes]) -> bool:
    """Whether every key is stored as itself (1 to SHORT_MAX bytes); two passes in C."""
    return not keys or (min(map(len, keys)) > 0 and max(map(len, keys)) <= SHORT_MAX)


def short_items(cursor: Any, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
    """Entries of the ``data`` database in ``[start, end)``, checked, in order or reversed."""
    # ``(end,) > (key, value)`` iff key < end, ``(start,) <= (key, value)`` iff start <= key:
    # the bound tests stay in C.
    if reverse:
        if end is None or not cursor.set_range(end[:SHORT_MAX]):
            positioned = cursor.last()  # no key >= end: start from the last key
        else:  # on the first key >= end's prefix; that prefix itself is below a long end
            positioned = cursor.prev() if cursor.key() >= end else True
        items = cursor.iterprev() if positioned else iter(())
        items = items if start is None else takewhile((start,).__le__, items)
    else:
        positioned = cursor.set_range(start[:SHORT_MAX]) if start else cursor.first()
        items = cursor.iternext() if positioned else iter(())
        if start is not None and len(start) > SHORT_MAX:
            items = dropwhile((start,).__gt__, items)  # skips start's prefix
        items = items if end is None else takewhile((end,).__gt__, items)
    return unsealed(items)


def long_items(cursor: Any, start: bytes | None, end: bytes | None, reverse: bool) -> Iterator[KeyValue]:
    """Entries of the ``long`` database's buckets in ``[start, end)``, checked, in order or reversed.

    Every key of the bucket of prefix ``P`` is above ``P``: buckets are positioned by the bounds'
    prefixes and the bounds are then applied to the keys.
    """
    if reverse:
        if end is None or not cursor.set_range(end[:SHORT_MAX]):
            positioned = cursor.last()
        else:  # the bucket of end's own prefix may hold keys below end
            positioned = cursor.prev() if cursor.key() > end[:SHORT_MAX] else True
        buckets = cursor.iterprev() if positioned else iter(())
        items: Iterator[tuple[bytes, bytes]] = chain.from_iterable(_expanded(p, r)[::-1] for p, r in buckets)
        items = items if end is None else dropwhile((end,).__le__, items)
        return items if start is None else takewhile((start,).__le__, items)
    positioned = cursor.set_range(start[:SHORT_MAX]) if start else cursor.first()
    buckets = cursor.iternext() if positioned else iter(())
    forward: Iterator[tuple[bytes, bytes]] = chain.from_iterable(_expanded(p, r) for p, r in buckets)
    items = forward if start is None else dropwhile((start,).__gt__, forward)
    return items if end is None else takewhile((end,).__gt__, items)


def _expanded(prefix: bytes, record: bytes) -> list[KeyValue]:
    return [(prefix + suffix, value) for suffix, value in decode_bucket(prefix, unseal(prefix, record))]


Prepared = tuple["list[KeyValue] | Columns", list[KeyValue], "bytes | None"]


class Loader:
    """Turns sorted chunks into records for the three databases, keeping order across chunks.

    Keys with one long prefix are adjacent in sorted order, so a bucket is complete when a key
    with another prefix arrives (or the input ends); it may span chunks.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.count = 0
        self.previous: bytes | None = None
        self.bucket: tuple[bytes, list[KeyValue]] | None = None  # (prefix, entries) still open

    def prepare(self, chunk: list[KeyValue], final: bool) -> Prepared:
        try:
            if self.bucket is None and chunk and all_short(list(map(_KEY, chunk))):
                if self.previous is not None and chunk[0][0] <= self.previous:
                    raise StoreError(self._order(chunk[0][0]))
                short = sealed(chunk)  # MDB_APPEND checks order within the chunk
                self.previous = chunk[-1][0]
                self.count += len(chunk)
                return short, [], None
            return self._prepare_mixed(chunk, final)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"load_sorted into {self.path}: bad entry ({exc}); puts must be "
                             "(bytes, bytes) pairs") from exc

    def prepare_arrays(self, keys: pa.Array, values: pa.Array, final: bool) -> tuple[Prepared, Iterable[KeyValue]]:
        """:meth:`prepare` for a chunk of Arrow arrays, and the chunk's records (for messages).

        A chunk of short keys outside a bucket is sealed by :func:`sealed_arrays`; any other takes
        the per-entry path of :meth:`prepare`.
        """
        if len(keys) != len(values):
            raise StoreError(f"load_sorted into {self.path}: a chunk of {len(keys)} keys has "
                             f"{len(values)} values; every key needs one value")
        if self.bucket is None and len(keys) and not keys.null_count:
            lengths = pc.min_max(pc.binary_length(keys)).as_py() if _is_binary(keys) else None
            if lengths is not None and lengths["min"] > 0 and lengths["max"] <= SHORT_MAX:
                try:
                    short = sealed_arrays(keys, values)
                except (TypeError, ValueError) as exc:
                    raise StoreError(f"load_sorted into {self.path}: bad entry ({exc}); puts must be "
                                     "(bytes, bytes) pairs") from exc
                if self.previous is not None and short.keys[0] <= self.previous:
                    raise StoreError(self._order(short.keys[0]))
                self.previous = short.keys[-1]
                self.count += len(short)
                return (short, [], None), short  # MDB_APPEND checks order within the chunk
        chunk = list(zip(keys.to_pylist(), values.to_pylist()))
        return self.prepare(chunk, final), chunk

    def _prepare_mixed(self, chunk: list[KeyValue], final: bool) -> Prepared:
        short: list[KeyValue] = []
        long: list[KeyValue] = []
        empty = None
        for key, value in chunk:
            if type(key) is not bytes or type(value) is not bytes:
                raise TypeError(f"a put needs (bytes, bytes), got ({key!r:.60}, {value!r:.60})")
            if self.previous is not None and key <= self.previous:
                raise StoreError(self._order(key))
            self.previous = key
            if 0 < len(key) <= SHORT_MAX:
                self._close_bucket(long)
                short.append((key, seal(key, value)))
            elif not key:
                empty = seal(EMPTY_KEY, value)
            else:
                prefix = key[:SHORT_MAX]
                if self.bucket is None or self.bucket[0] != prefix:
                    self._close_bucket(long)
                    self.bucket = (prefix, [])
                self.bucket[1].append((key[SHORT_MAX:], value))
        if final:
            self._close_bucket(long)
        self.count += len(chunk)
        return short, long, empty

    def _close_bucket(self, records: list[KeyValue]) -> None:
        if self.bucket is not None:
            prefix, entries = self.bucket
            records.append((prefix, seal(prefix, encode_bucket(entries))))
            self.bucket = None

    def _order(self, key: bytes) -> str:
        return (f"load_sorted into {self.path}: keys must be strictly ascending, but "
                f"{_shown(key)} follows {_shown(self.previous)}")


def _is_binary(array: pa.Array) -> bool:
    return pa.types.is_binary(array.type) or pa.types.is_large_binary(array.type)


def _shown(key: bytes | None) -> str:
    return repr(key) if key is None or len(key) <= 60 else f"{key[:60]!r}... ({len(key)} bytes)"
