"""How the LMDB backend lays entries out: checksummed records and buckets of long keys.

Pure byte functions (no LMDB), used by :mod:`statestore.lmdb`:

* every record LMDB holds for us is *sealed*: ``crc32(key, value)`` (4 bytes, big-endian) before
  the value, where ``key`` is the LMDB key of the record. :func:`unseal` checks it and raises
  :class:`Damaged` on a mismatch, so a flipped bit in a key or a value is found when the record
  is read instead of changing a result;
* a key longer than :data:`SHORT_MAX` bytes lives in a *bucket*: one record keyed by the key's
  first :data:`SHORT_MAX` bytes, holding every stored key with that prefix as sorted
  ``(suffix, value)`` pairs (:func:`encode_bucket` / :func:`decode_bucket`).
"""

from __future__ import annotations

import struct
from typing import Sequence
from zlib import crc32

__all__ = ["SHORT_MAX", "Damaged", "seal", "seal_pair", "unseal", "encode_bucket", "decode_bucket"]

#: The longest key stored as itself (LMDB's own limit is 511 bytes); longer keys go to buckets.
SHORT_MAX = 480

_CRC = struct.Struct(">I")
_LENGTHS = struct.Struct(">II")


class Damaged(Exception):
    """A record's checksum does not match its key and value (internal; the store reports it)."""

    def __init__(self, key: bytes) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        shown = self.key if len(self.key) <= 40 else self.key[:40] + b"..."
        return f"checksum mismatch in the record of key {shown!r} ({len(self.key)} bytes)"


def seal(key: bytes, value: bytes) -> bytes:
    """``value`` with its checksum (over ``key`` and ``value``) in front."""
    return _CRC.pack(crc32(value, crc32(key))) + value


def seal_pair(pair: tuple[bytes, bytes]) -> tuple[bytes, bytes]:
    """``(key, seal(key, value))``; raises TypeError/ValueError for anything but a bytes pair."""
    key, value = pair
    if type(key) is not bytes or type(value) is not bytes:
        raise TypeError(f"a put needs (bytes, bytes), got ({key!r:.60}, {value!r:.60})")
    return key, seal(key, value)


def unseal(key: bytes, record: bytes) -> bytes:
    """The value sealed in ``record`` under ``key``; raises :class:`Damaged` if the check fails."""
    value = record[4:]
    if len(record) < 4 or crc32(value, crc32(key)) != _CRC.unpack_from(record)[0]:
        raise Damaged(key)
    return value


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
