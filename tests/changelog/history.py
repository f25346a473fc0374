"""A fixed, realistic history for the damage, compaction and CLI tests, with its model."""

from __future__ import annotations

import os

from streamjoin.changelog import Changelog, apply_retention, compact
from streamjoin.changelog.format import Kind, LogFile
from tests.changelog.model import Model, Write


def write_for(version: int) -> Write:
    """Version ``v``: puts 3 keys, deletes one older key, and every third version a range."""
    puts = [(b"k%03d" % (version * 3 + i), b"v%d" % version) for i in range(3)]
    puts.append((b"shared", b"%d" % version))
    deletes = [b"k%03d" % (version * 2)] if version else []
    ranges = [(b"k%03d" % version, b"k%03d" % (version + 2))] if version % 3 == 2 else []
    return Write(puts, deletes, ranges)


def build(uri: str, versions: int = 10, snapshots: tuple[int, ...] = (4, 7), retain: int = 100) -> tuple[Changelog, Model]:
    """Versions ``0..versions-1``, compacted at ``snapshots``, then retention of ``retain``."""
    log = Changelog(uri, retain_versions=retain)
    model = Model()
    for version in range(versions):
        write = write_for(version)
        log.append(version, write.puts, write.deletes, write.delete_ranges)
        model.apply(version, write)
        if version in snapshots:
            compact(log, version)
    apply_retention(log)
    return log, model


def file_of(log: Changelog, kind: Kind, version: int) -> LogFile:
    listing = log.listing()
    return (listing.deltas if kind is Kind.DELTA else listing.snapshots)[version]


def path_of(log: Changelog, file: LogFile) -> str:
    return os.path.join(log.uri, file.name)


def truncate(log: Changelog, file: LogFile) -> None:
    """Cut the file to half its size (a torn write)."""
    with open(path_of(log, file), "r+b") as fh:
        fh.truncate(file.size // 2)


def flip_byte(log: Changelog, file: LogFile, at: int | None = None) -> None:
    """Invert one byte in the middle of the file (bit rot)."""
    with open(path_of(log, file), "r+b") as fh:
        fh.seek(file.size // 2 if at is None else at)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
