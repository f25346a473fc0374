"""Order-preserving 64-bit codes of a sorted column of fixed-width keys, for a typed binary search.

The keys of an arrangement (``streamjoin.statestore.arrangement``: fixed-width byte strings,
numpy ``S`` values) often differ in only a few byte positions. A key made of an area's tag and a
few integers shares the tags, the integers' high bytes and its length with every other key of the
column. Where the keys of a sorted column differ in at most eight positions, those bytes read
big-endian as one ``uint64`` order the keys exactly as their whole bytes do (the other positions
tie). A batch of probes is then searched with numpy's typed ``searchsorted`` of ``uint64``
values. Numpy searches ``S`` values through a generic comparison of byte strings, several times
slower, over an array about three times the size.

**Probes.** A probe is coded from the same positions. A probe that also matches the column's
common bytes sorts where its code does. A probe that differs from them is ordered by the first
position where it does, once its bytes before that position tie with a key's. Its code keeps the
bytes of the varying positions before that position. The rest is filled with ``0x00`` when the
probe's byte there is the smaller (it sorts before every key it ties with so far), or with
``0xff`` when it is the larger (after them). Such a probe equals no key, so its search lands
exactly where a search of its bytes would.

**When.** ``LazyIndex`` codes a column only once searches of it have probed a quarter as many
keys as it holds, so a column searched once with a few probes (a store opened for one task)
never pays for codes it would not use, and one searched version after version (a store a
worker keeps warm) is coded early in its life.

**Through a merge.** A store merges its base with the changes held beside it into a new base
every few versions. Coding the new base from its keys would read every key again;
``KeyIndex.carried`` instead keeps the codes of the old base's keys that stay and codes only the
keys the merge adds, with their segment's positions. That works while the added keys start with a
first byte the column has and share their segment's common bytes. An added key that does not
leaves the new base to be coded from its keys, as a new column is.

**Segments.** A store's column holds several areas, each under its own first byte (a tag), whose
keys differ in different positions. ``KeyIndex`` codes each run of keys with one first byte on its
own (``KeyCodes``) and routes a probe to its first byte's run. A run whose keys differ in more
than eight positions has no codes: its probes are searched as ``S`` values, in that run only.
A column of more than ``MAX_SEGMENTS`` first bytes is not coded at all.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

__all__ = ["LazyIndex", "KeyIndex", "KeyCodes", "Carried", "search", "varying", "pack_codes", "CODE_BYTES", "MAX_SEGMENTS"]

#: Bytes of a code: the most positions a column's keys may differ in.
CODE_BYTES = 8
#: The most first bytes a coded column may have (one search a segment that probes reach).
MAX_SEGMENTS = 16
#: A column is coded once its searches have probed one key per this many of its keys: coding
#: reads every key once (about 60 ns a key here), a coded search saves 0.2-0.7 us a probe (more
#: the larger the column), so the codes have paid for themselves by then.
_KEYS_PER_PROBE = 4
#: ``_FILL[k]``: the bits of a code after its first ``k`` bytes.
_FILL = np.array([(1 << (8 * (CODE_BYTES - k))) - 1 for k in range(CODE_BYTES + 1)], np.uint64)


def search(mine: np.ndarray, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
    """``np.searchsorted(mine, theirs, side)``, the probes visited in ascending order: numpy then
    starts each search where the previous one ended, and walks the sorted column forward instead
    of jumping across it, many times faster once the column outgrows the CPU's caches (a batch's
    keys come in the order of its rows). Probes already in order are not sorted again. Works on
    ``S`` keys and on codes alike."""
    if len(theirs) < 2 or bool((theirs[1:] >= theirs[:-1]).all()):
        return np.searchsorted(mine, theirs, side=side)
    order = np.argsort(theirs)   # (equal probes land alike: any order of them does; numpy's fastest sort)
    at = np.empty(len(theirs), np.int64)
    at[order] = np.searchsorted(mine, theirs[order], side=side)
    return at


def varying(matrix: np.ndarray) -> np.ndarray:
    """The columns of a (n, w) uint8 matrix (n > 0) in which some row differs from another,
    ascending. A column varies where the OR of its bytes differs from their AND (two different
    bytes differ in a bit, set in one, clear in the other); each is folded in halves, one
    contiguous operation a step, not a row at a time."""
    return np.flatnonzero(_fold(matrix, np.bitwise_or) != _fold(matrix, np.bitwise_and))


def _fold(matrix: np.ndarray, op: np.ufunc) -> np.ndarray:
    """``op`` reduced over the rows of ``matrix`` (one row), folding the lower half into the upper."""
    n = len(matrix)
    if n == 1:
        return matrix[0].copy()
    half = n // 2
    rows = op(matrix[:half], matrix[half:2 * half])
    if n % 2:
        op(rows[0], matrix[n - 1], out=rows[0])
    n = half
    while n > 1:
        half = n // 2
        op(rows[:half], rows[half:2 * half], out=rows[:half])
        if n % 2:
            op(rows[0], rows[n - 1], out=rows[0])
        n = half
    return rows[0]


def _matrix(ekeys: np.ndarray) -> np.ndarray:
    """``S`` values as a matrix of their bytes, one row a key (no copy where they are contiguous)."""
    return np.ascontiguousarray(ekeys).view(np.uint8).reshape(len(ekeys), ekeys.dtype.itemsize)


def pack_codes(matrix: np.ndarray, varying: np.ndarray) -> np.ndarray:
    """The bytes at ``varying`` of each row, big-endian in a ``uint64`` (zero bytes after them):
    each position's column of bytes copied (strided) into its byte of the codes in the machine's
    order, with no temporary and no byte swap."""
    n = len(matrix)
    codes = np.zeros(n, np.uint64)
    if not n:
        return codes
    view = codes.view(np.uint8).reshape(n, CODE_BYTES)
    little = sys.byteorder == "little"
    for i, position in enumerate(varying.tolist()):
        view[:, CODE_BYTES - 1 - i if little else i] = matrix[:, position]
    return codes


@dataclass(frozen=True)
class KeyCodes:
    """The codes of a sorted column of unique ``S`` keys (see module)."""

    size: int               # bytes of a key (the column's itemsize)
    common: np.ndarray      # uint8[size]: the first key's bytes; every key's outside ``varying``
    varying: np.ndarray     # int64: the positions where the keys differ, ascending (at most 8)
    constant: np.ndarray    # int64: the other positions, ascending
    codes: np.ndarray       # uint64: each key's code, strictly ascending

    @classmethod
    def of(cls, ekeys: np.ndarray) -> KeyCodes | None:
        """The codes of ``ekeys`` (sorted, unique), or None when they differ in more than
        ``CODE_BYTES`` positions or there are none. Finds the varying positions by two folds of
        the column (``varying``), then codes it a block of rows at a time."""
        n, size = len(ekeys), ekeys.dtype.itemsize
        if not n:
            return None
        matrix = _matrix(ekeys)
        at = varying(matrix)
        if len(at) > CODE_BYTES:
            return None
        constant = np.setdiff1d(np.arange(size), at)
        return cls(size, matrix[0].copy(), at, constant, pack_codes(matrix, at))

    @property
    def nbytes(self) -> int:
        """Bytes the codes hold in memory."""
        return int(self.codes.nbytes)

    def codes_of(self, theirs: np.ndarray) -> np.ndarray | None:
        """The codes of keys ``theirs`` (``S`` values of the keys' width) that share the
        column's common bytes; None when one of them does not (it has no code here)."""
        matrix = _matrix(theirs)
        if len(self.constant) and bool((matrix[:, self.constant] != self.common[self.constant]).any()):
            return None
        return pack_codes(matrix, self.varying)

    def search(self, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
        """``np.searchsorted(keys, theirs, side)`` of the coded keys, for probes ``theirs`` of the
        keys' width (``S`` values of the same itemsize; ``ValueError`` otherwise). Probes out of
        order are searched in order (numpy then walks the codes forward) and given back in theirs."""
        if theirs.dtype.itemsize != self.size:
            raise ValueError(f"probes of {theirs.dtype.itemsize} bytes for keys of {self.size}")
        if not len(theirs):
            return np.zeros(0, np.int64)
        matrix = _matrix(theirs)
        codes = pack_codes(matrix, self.varying)
        odd = np.zeros(0, np.int64)
        if len(self.constant):
            off = matrix[:, self.constant] != self.common[self.constant]
            odd = np.flatnonzero(off.any(axis=1))
        if len(odd):
            # the first position where each odd probe leaves the common bytes, and its way
            where = self.constant[off[odd].argmax(axis=1)]
            lower = matrix[odd, where] < self.common[where]
            fill = _FILL[np.searchsorted(self.varying, where)]
            codes[odd] = np.where(lower, codes[odd] & ~fill, codes[odd] | fill)
        at = search(self.codes, codes, side)
        if len(odd):
            # an odd probe equals no key: filled with 0x00 it is searched on the left, with 0xff on the right
            wrong = odd[lower] if side == "right" else odd[~lower]
            if len(wrong):
                at[wrong] = search(self.codes, codes[wrong], "left" if side == "right" else "right")
        return at


@dataclass(frozen=True)
class KeyIndex:
    """The codes of a sorted column of unique ``S`` keys, one ``KeyCodes`` per first byte (see
    module); build with ``of``."""

    ekeys: np.ndarray
    firsts: np.ndarray                      # uint8: each segment's first byte, ascending
    starts: np.ndarray                      # int64: each segment's first position, then the length
    parts: tuple[KeyCodes | None, ...]      # None: a segment searched as bytes

    @classmethod
    def of(cls, ekeys: np.ndarray) -> KeyIndex | None:
        """The index of ``ekeys`` (sorted, unique); None when it has no keys, more than
        ``MAX_SEGMENTS`` first bytes, or no segment with codes."""
        if not len(ekeys):
            return None
        first = _matrix(ekeys)[:, 0]
        cuts = np.flatnonzero(first[1:] != first[:-1]) + 1
        if len(cuts) >= MAX_SEGMENTS:
            return None
        starts = np.concatenate([[0], cuts, [len(ekeys)]]).astype(np.int64)
        parts = tuple(KeyCodes.of(ekeys[a:b]) for a, b in zip(starts[:-1].tolist(), starts[1:].tolist()))
        if all(part is None for part in parts):
            return None
        return cls(ekeys, first[starts[:-1]].copy(), starts, parts)

    @property
    def nbytes(self) -> int:
        """Bytes the codes hold in memory."""
        return sum(part.nbytes for part in self.parts if part is not None)

    def carried(self, kept: np.ndarray, added: np.ndarray, slots: np.ndarray) -> Carried | None:
        """The index of a merged column, without reading its kept keys again: the column of this
        one's keys at positions ``kept`` (ascending) and the keys ``added`` (``S`` values of the
        same width, ascending, none of them kept) at positions ``slots`` of it. The kept keys keep
        their codes; the added ones are coded with their segment's positions. None when a segment
        has no codes, or an added key has a first byte no segment has or does not share its
        segment's common bytes (the merged column is then coded from its keys, ``LazyIndex``)."""
        if any(part is None for part in self.parts) or added.dtype.itemsize != self.ekeys.dtype.itemsize:
            return None
        parts: list[KeyCodes] = [part for part in self.parts if part is not None]
        segments = len(parts)
        added_first = _matrix(added)[:, 0] if len(added) else np.zeros(0, np.uint8)
        added_segment = np.searchsorted(self.firsts, added_first)
        if len(added) and (bool((added_segment >= segments).any())
                           or bool((self.firsts[np.minimum(added_segment, segments - 1)] != added_first).any())):
            return None
        # both sides are in key order, so each segment's kept and added keys are a slice of them
        kept_at = np.searchsorted(kept, self.starts)
        added_at = np.searchsorted(added_segment, np.arange(segments + 1))
        starts = np.zeros(segments + 1, np.int64)
        np.cumsum(np.diff(kept_at) + np.diff(added_at), out=starts[1:])
        codes = np.empty(int(starts[-1]), np.uint64)
        from_kept = np.ones(len(codes), bool)
        from_kept[slots] = False
        out: list[tuple[int, KeyCodes]] = []
        for s, part in enumerate(parts):
            a, b = int(starts[s]), int(starts[s + 1])
            if a == b:
                continue   # every key of the segment gone
            if added_at[s + 1] > added_at[s]:
                coded = part.codes_of(added[added_at[s]:added_at[s + 1]])
                if coded is None:
                    return None
                codes[slots[added_at[s]:added_at[s + 1]]] = coded
            mine = codes[a:b]
            mine[from_kept[a:b]] = part.codes[kept[kept_at[s]:kept_at[s + 1]] - self.starts[s]]
            out.append((s, replace(part, codes=mine)))
        kinds = np.array([s for s, _ in out], np.int64)
        bounds = np.array([starts[s] for s, _ in out] + [starts[-1]], np.int64)
        return Carried(self.firsts[kinds], bounds, tuple(part for _, part in out))

    def search(self, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
        """``np.searchsorted(self.ekeys, theirs, side)`` for probes of the keys' width (``S``
        values of the same itemsize; ``ValueError`` otherwise)."""
        if theirs.dtype.itemsize != self.ekeys.dtype.itemsize:
            raise ValueError(f"probes of {theirs.dtype.itemsize} bytes for keys of {self.ekeys.dtype.itemsize}")
        first = _matrix(theirs)[:, 0] if len(theirs) else np.zeros(0, np.uint8)
        segment = np.searchsorted(self.firsts, first)
        inside = segment < len(self.firsts)
        inside[inside] = self.firsts[segment[inside]] == first[inside]
        at = self.starts[segment]   # a probe of no segment's first byte: before the next segment
        for s in np.unique(segment[inside]).tolist():
            rows = np.flatnonzero(inside & (segment == s))
            part, start = self.parts[s], int(self.starts[s])
            found = part.search(theirs[rows], side) if part is not None else \
                search(self.ekeys[start:int(self.starts[s + 1])], theirs[rows], side)
            at[rows] = start + found
        return at


@dataclass(frozen=True)
class Carried:
    """A ``KeyIndex`` carried through a merge (``KeyIndex.carried``), before the merged column is
    read back: ``bind`` it to the column."""

    firsts: np.ndarray
    starts: np.ndarray
    parts: tuple[KeyCodes | None, ...]      # None: a segment searched as bytes (as in ``KeyIndex``)

    def bind(self, ekeys: np.ndarray) -> KeyIndex | None:
        """The index of ``ekeys``, the merged column (None: not the column it was made for)."""
        if not len(ekeys) or len(ekeys) != int(self.starts[-1]) or \
                any(part is not None and part.size != ekeys.dtype.itemsize for part in self.parts):
            return None
        return KeyIndex(ekeys, self.firsts, self.starts, self.parts)


class LazyIndex:
    """A column's ``KeyIndex``, made once its searches have probed enough keys (see module), or
    never where it would take more than ``limit`` bytes (None: no limit)."""

    def __init__(self, ekeys: np.ndarray, limit: int | None = None, made: KeyIndex | None = None) -> None:
        """``made``: the column's index made already (carried through the merge that wrote it)."""
        self.ekeys, self.limit = ekeys, limit
        self._probed = 0
        self._index: KeyIndex | None = None
        self._made = limit is not None and CODE_BYTES * len(ekeys) > limit   # (too large: never made)
        if made is not None and not self._made:
            self._index, self._made = made, True

    @property
    def made(self) -> KeyIndex | None:
        """The index if it is made (never makes it)."""
        return self._index if self._made else None

    @property
    def index(self) -> KeyIndex | None:
        """The index, made now if it is not yet (None: the column cannot be coded)."""
        if not self._made:
            self._index, self._made = KeyIndex.of(self.ekeys), True
        return self._index

    def search(self, theirs: np.ndarray, side: Literal["left", "right"] = "left") -> np.ndarray:
        """``np.searchsorted(self.ekeys, theirs, side)``: by the index where it is made (or
        these probes make it), else of the keys' bytes (``search``)."""
        if not self._made:
            self._probed += len(theirs)
            if self._probed * _KEYS_PER_PROBE < len(self.ekeys):
                return search(self.ekeys, theirs, side)
        index = self.index
        return index.search(theirs, side) if index is not None else search(self.ekeys, theirs, side)
