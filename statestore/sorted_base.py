"""A sorted base: the bulk of an arranged store, read through a memory map from two immutable files.

* ``<stem>.keys``: the base's keys in the arrangement's fixed-width form
  (``streamjoin.statestore.arrangement``), sorted, back to back: a numpy ``S`` array over the
  memory map, searched with no copy;
* ``<stem>.arrow``: an Arrow IPC file of one ``value`` column (``large_binary``), the value of the
  key at the same position, in record batches (the key form's size is the key file's size over
  the number of values).

Nothing of a base is read into the process's own memory when it opens: the operating system
pages the files in as probes touch them and can drop the pages again, so a base counts against
the machine's page cache, not against the worker's memory budget. ``BaseWriter`` writes a base a
chunk at a time (a merge of a base with the changes held in memory, or a restore), so writing
one never holds the whole state either.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from streamjoin.statestore.arrangement import (
    LENGTH_BYTES,
    ValueLog,
    data_size,
    decode_keys,
    encode_clipped,
    encode_keys,
    key_lengths,
    widen_keys,
)
from streamjoin.statestore.crc_file import CrcWriter
from streamjoin.statestore.keycodes import KeyIndex, LazyIndex

__all__ = ["SortedBase", "BaseWriter", "write_keys", "remove_file", "KEYS", "DATA"]

#: File name suffixes of a base's two files.
KEYS = ".keys"
DATA = ".arrow"
_SCHEMA = pa.schema([("value", pa.large_binary())])
#: Plain keys encoded at a time when a restore's base is finished.
_ENCODE_ROWS = 1 << 17


@dataclass(frozen=True)
class SortedBase:
    """A sorted map of unique keys whose value of position ``i`` is ``values`` row ``i``."""

    ekeys: np.ndarray
    values: ValueLog
    #: the most bytes of memory the keys' codes may take (None: no limit); a base whose codes
    #: would take more is searched as bytes
    code_limit: int | None = None
    #: the keys' codes made already: carried through the merge that wrote the base
    #: (``streamjoin.statestore.keycodes.KeyIndex.carried``)
    made: KeyIndex | None = field(default=None, compare=False, repr=False)

    @classmethod
    def empty(cls) -> SortedBase:
        return cls(np.zeros(0, f"S{LENGTH_BYTES}"), ValueLog())

    @classmethod
    def mapped(cls, keys: pa.Buffer, data: pa.Buffer, code_limit: int | None = None) -> SortedBase:
        """The base of a ``.keys`` and a ``.arrow`` file's contents (memory-mapped buffers: no
        copy), its codes limited to ``code_limit`` bytes; ``ValueError`` when they do not make
        one. The values are the ``.arrow`` file's
        ``value`` column: its only one (a base written here), or beside a ``key`` column (a
        changelog snapshot taken as the base, ``SourceFile``); binary values are read as large
        binary (new offsets, the values' bytes not copied)."""
        reader = pa.ipc.open_file(pa.BufferReader(data))
        at = reader.schema.get_field_index("value")
        if at < 0:
            raise ValueError(f"an Arrow file of columns {reader.schema.names}, none of them 'value'")
        log = ValueLog()
        for i in range(reader.num_record_batches):
            log = log.appended(reader.get_batch(i).column(at).cast(pa.large_binary()))
        n = len(log)
        if not n:
            if keys.size:
                raise ValueError(f"a key file of {keys.size} bytes beside no values")
            return cls.empty()
        size = keys.size // n
        if size < LENGTH_BYTES or keys.size % n:
            raise ValueError(f"a key file of {keys.size} bytes does not hold {n} keys")
        return cls(np.frombuffer(keys, f"S{size}", n), log, code_limit)

    def __len__(self) -> int:
        return len(self.ekeys)

    @property
    def width(self) -> int:
        return self.ekeys.dtype.itemsize - LENGTH_BYTES

    @cached_property
    def nbytes(self) -> int:
        """Bytes of the keys and values held."""
        return int(key_lengths(self.ekeys).sum()) + sum(data_size(chunk) for chunk in self.values.chunks)

    # -- positions --------------------------------------------------------------------------------

    @cached_property
    def _index(self) -> LazyIndex:
        return LazyIndex(self.ekeys, self.code_limit, self.made)

    @property
    def made_codes(self) -> KeyIndex | None:
        """The keys' codes if they are made (never makes them)."""
        return self._index.made

    @property
    def codes(self) -> KeyIndex | None:
        """The keys' 64-bit codes (``streamjoin.statestore.keycodes``), held in memory (8 bytes
        a key), made now if the searches have not made them yet; None where no area's keys can
        be coded or the codes would take more than ``code_limit`` bytes (searched as bytes)."""
        return self._index.index

    def search(self, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
        """``np.searchsorted(self.ekeys, theirs, side)`` of keys in the fixed-width form at the
        base's width: by their codes once the base's searches have paid for them
        (``streamjoin.statestore.keycodes.LazyIndex``)."""
        return self._index.search(theirs, side)

    def _positions(self, keys: pa.Array, side: Literal["left", "right"]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per key, where it is or would go (``side`` of equal keys), whether it fits the width,
        and its encoded form at the width.

        A key longer than the base's width is after every base key that is at most its first
        ``width`` bytes and before all others: it is searched as those bytes, on the right."""
        theirs, longer = encode_clipped(keys, self.width)
        at = self.search(theirs, side)
        if side == "left" and longer.any():
            at[longer] = self.search(theirs[longer], "right")
        return at, ~longer, theirs

    def find_encoded(self, ekeys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``find`` of keys in the fixed-width form, ascending (a delta's)."""
        if ekeys.dtype.itemsize < self.ekeys.dtype.itemsize and len(self):   # (narrower keys: padded, not decoded)
            ekeys = widen_keys(ekeys, self.width)
        if ekeys.dtype.itemsize != self.ekeys.dtype.itemsize or not len(self):
            return self.find(decode_keys(ekeys))
        at = self.search(ekeys)
        found = np.zeros(len(at), bool)
        inside = at < len(self)
        found[inside] = self.ekeys[at[inside]] == ekeys[inside]
        return at, found

    def find(self, keys: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """For each key, its position (where it is, or would be inserted) and whether it is there."""
        if not len(self) or not len(keys):
            return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
        at, fits, theirs = self._positions(keys, "left")
        found = np.zeros(len(at), bool)
        inside = fits & (at < len(self))
        found[inside] = self.ekeys[at[inside]] == theirs[inside]
        return at, found

    def get_column(self, keys: pa.Array) -> pa.Array:
        """The value of each of ``keys`` as a binary array, null where absent."""
        if not len(keys) or not len(self):
            return pa.nulls(len(keys), pa.binary())
        at, found = self.find(keys)
        return self.values.take(np.where(found, at, -1)).cast(pa.binary())

    def bounds(self, ranges: Sequence[tuple[bytes | None, bytes | None]]) -> tuple[np.ndarray, np.ndarray]:
        """Per ``[start, end)`` range (None: unbounded), the positions ``lo, hi`` of its entries."""
        lo = np.zeros(len(ranges), np.int64)
        hi = np.full(len(ranges), len(self), np.int64)
        for side, out in ((0, lo), (1, hi)):
            where = [i for i, r in enumerate(ranges) if r[side] is not None]
            if where and len(self):
                out[where] = self._positions(pa.array([ranges[i][side] for i in where], pa.binary()), "left")[0]
        return lo, np.maximum(hi, lo)

    def prefix_bounds(self, prefixes: pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """Per prefix, the positions ``lo, hi`` of the keys that start with it (a prefix longer
        than the width has none)."""
        if not len(self) or not len(prefixes):
            return np.zeros(len(prefixes), np.int64), np.zeros(len(prefixes), np.int64)
        lo, fits, theirs = self._positions(prefixes, "left")
        size = theirs.dtype.itemsize
        upper = theirs.view(np.uint8).reshape(len(theirs), size).copy()
        upper[np.arange(size)[None, :] >= key_lengths(theirs)[:, None]] = 0xFF
        hi = self.search(upper.view(f"S{size}").reshape(len(theirs)), side="right")
        return lo, np.where(fits, np.maximum(hi, lo), lo)

    def keys_at(self, at: np.ndarray) -> pa.Array:
        """The keys at positions ``at``, as a ``large_binary`` array."""
        return decode_keys(self.ekeys[at])


class BaseWriter:
    """Writes a base's two files a chunk at a time, in key order (the caller keeps it): ``add``
    chunks of encoded keys (a merge), or ``add_raw`` chunks of plain keys (a restore: the keys are
    kept until ``finish`` encodes them at the longest one's width, the values written as they
    come); then ``finish``, or ``abort`` to remove what was written."""

    def __init__(self, directory: str, stem: str, sync: bool) -> None:
        self.names = (stem + DATA, stem + KEYS)
        self._paths = [os.path.join(directory, name) for name in self.names]
        self._sync = sync
        for path in self._paths:   # new files, never a write through a link (a snapshot taken as a base)
            remove_file(path)
        self._files = [open(path, "wb") for path in self._paths]
        self._data, self._keys = (CrcWriter(f) for f in self._files)
        self._ipc = pa.ipc.new_file(self._data, _SCHEMA)
        self._raw: list[pa.Array] = []
        self._size = 0
        self.rows = 0

    def add(self, ekeys: np.ndarray, values: pa.Array) -> None:
        """Append entries: their keys in the fixed-width form (one size for the whole base)."""
        if self._raw or (self._size and ekeys.dtype.itemsize != self._size) or len(ekeys) != len(values):
            raise ValueError(f"{len(ekeys)} keys of {ekeys.dtype.itemsize} bytes and {len(values)} values do not "
                             f"continue this base")
        if len(ekeys):
            self._size = ekeys.dtype.itemsize
            self._keys.write(np.ascontiguousarray(ekeys).view(np.uint8))
            self._values(values)

    def add_raw(self, keys: pa.Array, values: pa.Array) -> None:
        """Append entries whose keys are plain binary (kept in memory until ``finish``)."""
        if self._size or len(keys) != len(values):
            raise ValueError(f"{len(keys)} keys and {len(values)} values do not continue this base")
        if len(keys):
            self._raw.append(keys.cast(pa.large_binary()))
            self._values(values)

    def _values(self, values: pa.Array) -> None:
        self._ipc.write_batch(pa.record_batch([values.cast(pa.large_binary())], schema=_SCHEMA))
        self.rows += len(values)

    def finish(self) -> list[tuple[str, int, int]]:
        """Close the files (fsync'd when asked); their manifest entries (name, size, CRC-32)."""
        if self._raw:
            _write_encoded(self._raw, self._keys)
            self._raw = []
        self._ipc.close()
        for f in self._files:
            if self._sync:
                f.flush()
                os.fsync(f.fileno())
            f.close()
        return [(name, sink.size, sink.crc) for name, sink in zip(self.names, (self._data, self._keys))]

    def abort(self) -> None:
        for f in self._files:
            f.close()
        for path in self._paths:
            remove_file(path)


def write_keys(path: str, chunks: Sequence[pa.Array], sync: bool) -> tuple[int, int]:
    """Write a base's ``.keys`` file at ``path`` from plain binary keys (ascending, in chunks),
    encoded at the longest one's width, fsync'd with ``sync``; its size and CRC-32."""
    remove_file(path)
    with open(path, "wb") as f:
        sink = CrcWriter(f)
        if chunks:
            _write_encoded(chunks, sink)
        if sync:
            f.flush()
            os.fsync(f.fileno())
    return sink.size, sink.crc


def _write_encoded(chunks: Sequence[pa.Array], sink: CrcWriter) -> None:
    """The fixed-width form of every key of ``chunks`` (plain binary) at the longest one's width."""
    width = max(int(pc.max(pc.binary_length(chunk)).as_py() or 0) for chunk in chunks)
    for chunk in chunks:
        for at in range(0, len(chunk), _ENCODE_ROWS):
            sink.write(np.ascontiguousarray(encode_keys(chunk[at:at + _ENCODE_ROWS], width)).view(np.uint8))


def remove_file(path: str) -> None:
    """Remove the file ``path`` if it is there."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
