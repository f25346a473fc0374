"""What an arranged store leaves beside its files when another process is about to open it.

A partition's next task often lands in another Python worker than the one that keeps its store
warm (``streamjoin.statestore.warm``): that worker closes the store on request and the new one
opens it from its files. Such an open repeats what the closing process had already done: it
checks the CRC-32 of every file the manifest names (the base's too, tens of megabytes), applies
every run since the base again into a new delta, and codes the base's keys again (or searches
them as bytes until its searches pay for the codes).

A store closed for a hand-over (``ArrangedStore.hand_over``) writes instead, beside its files,
one ``HANDOVER`` file with what it holds in memory:

* the manifest entries (name, size, CRC-32) of the files its state is made of, which the file
  is valid for, and how many entries its runs hold;
* its delta (``Arrangement.columns``: the encoded keys and their values, in key order);
* its base's key codes where they are made (``streamjoin.statestore.keycodes.KeyIndex``), and
  the base's byte count where it is known.

The next open of the directory (any process, any time) takes the file and removes it. It uses
it only when the manifest's current files are exactly the ones it names (the state is a
function of its files, so the delta is then the one applying the runs would give) and the
file's own CRC-32 holds; anything else (no file, another state, a torn or damaged file) and the
open reads the files as before. A file the store wrote, or checked when it opened, is then not
checked again: the open trusts what the closing process trusted, as the next task in the same
process trusts the store it kept warm. The file is written without fsync and renamed into
place; a machine crash that leaves it torn is caught by its CRC.

Layout: the delta as an Arrow IPC file, the codes as raw ``uint64`` values from the next multiple
of 64 bytes, a JSON header (the sections' sizes among what it says); then 16 bytes: the header's
length (``uint64``), the CRC-32 of everything before them (``uint32``) and ``MAGIC``. The sections
are written to the file as they are made (their CRC kept as they go), so the file is never built in
memory or read back.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import pyarrow as pa

from streamjoin.statestore.arrangement import Arrangement, ekeys_of
from streamjoin.statestore.checksum import crc32
from streamjoin.statestore.crc_file import CrcWriter
from streamjoin.statestore.keycodes import Carried, KeyCodes, KeyIndex
from streamjoin.statestore.sorted_base import remove_file

__all__ = ["NAME", "MAGIC", "Handover", "write_handover", "take_handover"]

#: The file's name in the store directory.
NAME = "HANDOVER"
MAGIC = b"SJH1"
_TRAILER = struct.Struct("<QI4s")
_ALIGN = 64

_File = tuple[str, int, int]   # a manifest entry: name, size, CRC-32


@dataclass(frozen=True)
class Handover:
    """What a closing store left (see module): valid for the state made of ``files``."""

    files: tuple[_File, ...]
    run_entries: int
    delta: Arrangement
    #: the base's codes, to ``bind`` to its keys once mapped; None: not made
    codes: Carried | None
    #: the base's bytes of keys and values, None when the closing store had not counted them
    base_bytes: int | None


def _pad(size: int) -> int:
    return -size % _ALIGN


def write_handover(directory: str, files: Sequence[_File], run_entries: int, delta: Arrangement,
                   codes: KeyIndex | None, base_bytes: int | None) -> None:
    """Write the hand-over file of a store made of ``files`` into ``directory`` (replacing one
    there), streamed to the file (no copy of it in memory); raises ``OSError`` when it cannot
    (the caller goes on without)."""
    target = os.path.join(directory, NAME)
    table = delta.columns()
    parts: list[dict[str, Any] | None] = []
    code_arrays: list[np.ndarray] = []
    if codes is not None:
        for part in codes.parts:
            if part is None:
                parts.append(None)
                continue
            parts.append({"size": part.size, "common": part.common.tobytes().hex(), "varying": part.varying.tolist(),
                          "constant": part.constant.tolist(), "n": len(part.codes)})
            code_arrays.append(np.ascontiguousarray(part.codes, "<u8"))
    with open(target + ".new", "wb") as file:
        out = CrcWriter(file)   # (the CRC of what is written, as it goes)
        with pa.ipc.new_file(out, table.schema) as writer:
            writer.write_table(table)
        arrow = out.tell()
        out.write(b"\0" * _pad(arrow))
        for array in code_arrays:
            out.write(array.data.cast("B"))   # (contiguous: made so above)
        header = json.dumps({
            "files": [list(f) for f in files], "run_entries": run_entries, "base_bytes": base_bytes, "arrow": arrow,
            "codes": None if codes is None else {"firsts": codes.firsts.tolist(), "starts": codes.starts.tolist(),
                                                 "parts": parts},
        }).encode()
        out.write(header)
        file.write(_TRAILER.pack(len(header), out.crc, MAGIC))
    os.replace(target + ".new", target)


def take_handover(directory: str, files: Sequence[_File]) -> Handover | None:
    """The hand-over file of ``directory`` when it is valid for the state made of ``files``
    (see module), else None; the file is removed either way."""
    path = os.path.join(directory, NAME)
    try:
        data = pa.memory_map(path).read_buffer()   # (mapped: its pages outlive the removal)
    except OSError:
        remove_file(path + ".new")
        return None
    try:
        return _parsed(data, files)
    finally:
        remove_file(path)
        remove_file(path + ".new")


def _parsed(data: pa.Buffer, files: Sequence[_File]) -> Handover | None:
    """The hand-over in ``data`` if it is whole and for ``files``, else None."""
    if data.size < _TRAILER.size:
        return None
    header_size, crc, magic = _TRAILER.unpack(data.slice(data.size - _TRAILER.size).to_pybytes())
    body = data.slice(0, data.size - _TRAILER.size)
    if magic != MAGIC or header_size > body.size or crc32(body) != crc:
        return None
    try:
        header = json.loads(body.slice(body.size - header_size).to_pybytes())
        if [tuple(f) for f in header["files"]] != [tuple(f) for f in files]:
            return None
        table = pa.ipc.open_file(pa.BufferReader(body.slice(0, int(header["arrow"])))).read_all()
        at = int(header["arrow"]) + _pad(int(header["arrow"]))
        delta = Arrangement.from_columns(ekeys_of(table.column("ekey")), table.column("value").combine_chunks()) \
            if table.num_rows else Arrangement.empty()
        codes = None
        if header["codes"] is not None:
            parts: list[KeyCodes | None] = []
            for part in header["codes"]["parts"]:
                if part is None:
                    parts.append(None)
                    continue
                n = int(part["n"])
                values = np.frombuffer(body, "<u8", n, at).astype(np.uint64, copy=False)
                at += 8 * n
                parts.append(KeyCodes(int(part["size"]), np.frombuffer(bytes.fromhex(part["common"]), np.uint8),
                                      np.array(part["varying"], np.int64), np.array(part["constant"], np.int64), values))
            codes = Carried(np.array(header["codes"]["firsts"], np.uint8), np.array(header["codes"]["starts"], np.int64),
                            tuple(parts))
        return Handover(tuple(tuple(f) for f in header["files"]), int(header["run_entries"]), delta, codes,
                        None if header["base_bytes"] is None else int(header["base_bytes"]))
    except (ValueError, KeyError, TypeError, IndexError, pa.ArrowInvalid, OSError):
        return None
