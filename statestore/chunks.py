"""Sorted entries handed to ``Store.load_sorted`` as Arrow chunks rather than Python pairs.

A restore reads its entries as Arrow record batches. :class:`SortedChunks` carries them to the
store as they are: it iterates as ``(key, value)`` pairs, so every backend's ``load_sorted`` takes
it unchanged, and a backend that works on whole chunks reads :meth:`SortedChunks.chunks` instead
(LMDB seals each chunk's records in a few C-level passes, with no Python step per entry).
"""

from __future__ import annotations

from itertools import chain
from typing import Iterable, Iterator

from streamjoin.statestore.base import KeyValue
from streamjoin.statestore.columns import Chunk

__all__ = ["SortedChunks", "Chunk"]


class SortedChunks:
    """Entries in strictly ascending key order, as ``(keys, values)`` Arrow chunks; read once.

    Iterating yields ``(key, value)`` pairs of ``bytes``; :meth:`chunks` yields the arrays.
    Either way the source is consumed: a second read finds nothing.
    """

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self._chunks = iter(chunks)

    def chunks(self) -> Iterator[Chunk]:
        """The chunks as they come (the consumer cuts or checks them)."""
        return self._chunks

    def __iter__(self) -> Iterator[KeyValue]:
        return chain.from_iterable(zip(k.to_pylist(), v.to_pylist()) for k, v in self._chunks)
