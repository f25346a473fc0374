"""streamjoin.statestore.checksum: zlib's CRC-32 values, whatever the size, continuation or buffer type;
streamjoin.statestore.crc_file: what a write hands the file."""

from __future__ import annotations

import zlib

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.statestore import checksum
from streamjoin.statestore.crc_file import PIECE_BYTES, CrcWriter, write_in_pieces


@pytest.mark.parametrize("size", [0, 1, checksum.LARGE - 1, checksum.LARGE, checksum.LARGE + 1, 1 << 20])
def test_crc32_matches_zlib_at_every_size(size: int) -> None:
    data = bytes((i * 31 + 7) % 256 for i in range(size))
    assert checksum.crc32(data) == zlib.crc32(data)
    assert checksum.crc32(memoryview(data), 12345) == zlib.crc32(data, 12345)
    assert checksum.crc32(pa.py_buffer(data)) == zlib.crc32(data)


@given(st.lists(st.binary(max_size=3 * checksum.LARGE), max_size=6))
def test_crc32_continued_over_pieces_is_the_whole_ones(pieces: list[bytes]) -> None:
    value = 0
    for piece in pieces:
        value = checksum.crc32(piece, value)
    assert value == zlib.crc32(b"".join(pieces))


class _Sink:
    def __init__(self) -> None:
        self.data = bytearray()
        self.calls: list[int] = []

    def write(self, view: memoryview) -> None:
        self.data += view
        self.calls.append(view.nbytes)


def test_crc32_writer_keeps_the_whole_files_crc() -> None:
    sink = _Sink()
    writer = CrcWriter(sink)
    for piece in (b"head", bytes(range(256)) * 40, b"", b"tail"):
        writer.write(piece)
    assert (writer.crc, writer.size) == (zlib.crc32(bytes(sink.data)), len(sink.data))


@pytest.mark.parametrize("size", [0, 5, PIECE_BYTES, PIECE_BYTES + 1, 3 * PIECE_BYTES + 17])
def test_write_in_pieces_hands_the_file_at_most_a_piece_a_call(size: int) -> None:
    data = (np.arange(size, dtype=np.int64) % 251).astype(np.uint8)
    sink = _Sink()
    writer = CrcWriter(sink)
    assert writer.write(pa.py_buffer(data.tobytes())) == size
    assert bytes(sink.data) == data.tobytes() and writer.size == size
    assert max(sink.calls) <= PIECE_BYTES and len(sink.calls) == max(1, -(-size // PIECE_BYTES))
    assert write_in_pieces(_Sink(), data.reshape(-1)) == size   # a numpy array's buffer as well


def test_crc32_is_accelerated_with_the_isal_dependency() -> None:
    assert checksum.ACCELERATED   # isal is a dependency: its wheels cover the platforms the suite runs on
