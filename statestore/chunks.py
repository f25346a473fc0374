"""Sorted entries handed to ``Store.load_sorted`` as Arrow chunks rather than Python pairs.

A restore reads its entries as Arrow record batches. :class:`SortedChunks` carries them to the
store as they are: it iterates as ``(key, value)`` pairs, so every backend's ``load_sorted`` takes
it unchanged, and a backend that works on whole chunks reads :meth:`SortedChunks.chunks` instead
(LMDB seals each chunk's records in a few C-level passes, with no Python step per entry).

A restore's snapshot is one Arrow IPC file of ``key`` and ``value`` columns, already verified;
its chunks carry that file as their :class:`SourceFile`, so a backend that keeps its state in
Arrow files takes the file itself as its values (the arranged store links or copies it) instead of
writing every value again.
"""

from __future__ import annotations

from itertools import chain
from typing import Iterable, Iterator

from streamjoin.statestore.base import KeyValue
from streamjoin.statestore.columns import Chunk, SourceFile

__all__ = ["SortedChunks", "SourceFile", "Chunk"]


class SortedChunks:
    """Entries in strictly ascending key order, as ``(keys, values)`` Arrow chunks; read once.

    Iterating yields ``(key, value)`` pairs of ``bytes``; :meth:`chunks` yields the arrays.
    Either way the source is consumed: a second read finds nothing.
    """

    def __init__(self, chunks: Iterable[Chunk], source: SourceFile | None = None) -> None:
        self._chunks = iter(chunks)
        #: the file the chunks are every row of, in order (None: they come from elsewhere)
        self.source = source

    def chunks(self) -> Iterator[Chunk]:
        """The chunks as they come (the consumer cuts or checks them)."""
        return self._chunks

    def __iter__(self) -> Iterator[KeyValue]:
        return chain.from_iterable(zip(k.to_pylist(), v.to_pylist()) for k, v in self._chunks)
