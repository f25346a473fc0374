"""A write-only file object that keeps the CRC-32 and size of what goes through it: the changelog's
files and the arranged store's bases are checked against both when they are read back."""

from __future__ import annotations

from typing import Any

from streamjoin.statestore.checksum import crc32

__all__ = ["CrcWriter"]


class CrcWriter:
    """A write-only file object that forwards to ``sink`` and keeps the CRC-32 and size so far."""

    def __init__(self, sink: Any) -> None:
        self._sink = sink
        self.crc = 0
        self.size = 0
        self.closed = False

    def write(self, data: Any) -> int:
        view = memoryview(data)
        self.crc = crc32(view, self.crc)
        self.size += view.nbytes
        self._sink.write(view)
        return view.nbytes

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True
