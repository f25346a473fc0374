"""CRC-32 (zlib's polynomial and values) of bytes, at memory speed for large buffers.

Every file the stores and the changelog write is checked against its CRC-32 when it is read back,
so a snapshot, a merge or a restore passes each byte through it once. zlib's ``crc32`` runs at
about 2 GB/s here; ISA-L's (the ``isal`` package) gives the same values at about 11 GB/s, with a
higher cost a call, so it takes buffers of at least ``LARGE`` bytes and zlib the small ones. Where
``isal`` cannot be imported (a platform without its wheels) every call goes to zlib: the values,
and so the files, are the same either way.
"""

from __future__ import annotations

import zlib
from typing import Any, Callable

__all__ = ["crc32", "LARGE", "ACCELERATED"]

#: Buffers of at least this many bytes go to ISA-L's ``crc32`` (below it zlib's is faster a call).
LARGE = 1024

_large: Callable[[Any, int], int]
try:
    from isal.isal_zlib import crc32 as _large
    ACCELERATED = True
except ImportError:   # pragma: no cover - isal is a dependency; this is for platforms without its wheels
    _large = zlib.crc32
    ACCELERATED = False


def crc32(data: Any, value: int = 0) -> int:
    """The CRC-32 of ``data`` (any object with the buffer protocol) continued from ``value``,
    as ``zlib.crc32(data, value)`` gives it."""
    view = data if isinstance(data, memoryview) else memoryview(data)
    return _large(view, value) if view.nbytes >= LARGE else zlib.crc32(view, value)
