"""The log itself: appends, replacement of a version, file names and checksums, atomicity,
temporary files, and the same behaviour on any pyarrow filesystem."""

from __future__ import annotations

import os
import zlib

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from streamjoin.changelog import (
    Changelog,
    ChangelogError,
    ChecksumMismatchError,
    VersionNotRetainedError,
    VersionOrderError,
    compact,
    restore,
)
from streamjoin.changelog.format import Kind
from streamjoin.changelog.inspect import verify
from streamjoin.changelog.storage import ArrowStorage, LocalStorage
from tests.changelog.history import build, file_of, flip_byte, write_for


def _names(log: Changelog) -> list[str]:
    return sorted(n for n in os.listdir(log.uri) if not n.startswith("."))


def test_changelog_append_names_carry_version_and_crc(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    written = log.append(0, [(b"k", b"v")], [b"gone"], [(b"a", b"b")])
    assert written.name.startswith("delta-00000000000000000000-")
    with open(os.path.join(log.uri, written.name), "rb") as fh:
        assert zlib.crc32(fh.read()) == written.crc
    delta = log.read_delta(written)
    assert delta.as_write() == ([(b"k", b"v")], [b"gone"], [(b"a", b"b")])
    assert log.versions() == [0] and log.latest() == 0


def test_changelog_delta_bytes_are_the_arrow_file_a_growing_buffer_writes(tmp_path):
    """The delta's bytes (from a buffer sized first where they are not compressed) must be the
    bytes (so the names and CRCs) a plain Arrow file writer with the deltas' options gives, for
    empty, null-bearing and multi-megabyte batches."""
    from streamjoin.changelog.format import COMPRESSED_BYTES, DELTA_OPTIONS
    from streamjoin.changelog.log import _ipc_bytes

    big = pa.array([bytes([i % 251]) * 300 for i in range(20_000)], pa.binary())
    batches = [
        pa.record_batch([pa.array([], pa.binary())], names=["k"]),
        pa.record_batch([pa.array([b"a", None, b"ccc"], pa.binary()), pa.array([1, 2, None], pa.int64())],
                        names=["k", "n"]),
        pa.record_batch([big, big.cast(pa.large_binary())], names=["k", "v"]),
    ]
    for batch in batches:
        sink = pa.BufferOutputStream()
        options = DELTA_OPTIONS if batch.nbytes >= COMPRESSED_BYTES else pa.ipc.IpcWriteOptions()
        with pa.ipc.new_file(sink, batch.schema, options=options) as writer:
            writer.write_batch(batch)
        expected = sink.getvalue()
        got = _ipc_bytes(batch)
        assert got.equals(expected)
        assert pa.ipc.open_file(got).read_all().equals(pa.Table.from_batches([batch]))


def test_changelog_delta_is_compressed_and_reads_back(tmp_path):
    """A delta's buffers are compressed where pyarrow has the codec (to under a third of a
    state's repetitive bytes here), and read back as written; a snapshot stays plain for a store to map."""
    from streamjoin.changelog.format import COMPRESSED_BYTES, DELTA_OPTIONS

    log = Changelog(str(tmp_path / "log"))
    puts = [(b"key-%06d" % i, b"value " * 20 + b"%d" % i) for i in range(12_000)]
    raw = sum(len(k) + len(v) for k, v in puts)
    assert raw > COMPRESSED_BYTES
    small = log.append(0, puts=puts[:100])
    assert small.size > sum(len(k) + len(v) for k, v in puts[:100])   # below the threshold: plain
    file = log.append(1, puts=puts)
    if DELTA_OPTIONS.compression is not None:
        assert file.size < raw / 3
    delta = log.read_delta(file)
    assert list(zip(delta.put_keys.to_pylist(), delta.put_values.to_pylist())) == puts
    snapshot = log.write_snapshot(1, [(pa.array([k for k, _ in puts], pa.large_binary()),
                                       pa.array([v for _, v in puts], pa.large_binary()))])
    assert snapshot.size > raw


def test_changelog_append_identical_delta_keeps_later_history(tmp_path):
    log, _ = build(str(tmp_path / "log"), versions=5, snapshots=(3,))
    before = _names(log)
    write = write_for(2)
    log.append(2, write.puts, write.deletes, write.delete_ranges)  # batch 2 executed again
    assert _names(log) == before and log.versions() == [0, 1, 2, 3, 4]


def test_changelog_append_different_delta_drops_later_history(tmp_path):
    log, _ = build(str(tmp_path / "log"), versions=5, snapshots=(3,))
    log.append(2, [(b"other", b"output")])
    assert log.versions() == [0, 1, 2]
    assert log.snapshot_versions() == [] and log.delta_versions() == [0, 1, 2]
    assert log.read_delta(file_of(log, Kind.DELTA, 2)).as_write()[0] == [(b"other", b"output")]


def test_changelog_append_refuses_missing_versions(tmp_path):
    log, _ = build(str(tmp_path / "log"), versions=3, snapshots=())
    with pytest.raises(VersionOrderError, match="versions 3..4 would be missing") as info:
        log.append(5, [(b"k", b"v")])
    assert info.value.versions == (3, 4) and log.versions() == [0, 1, 2]
    with pytest.raises(TypeError, match="int >= 0"):
        log.append(-1)


def test_changelog_append_refuses_version_whose_base_is_compacted(tmp_path):
    log, _ = build(str(tmp_path / "log"), versions=6, snapshots=(4,), retain=2)
    assert log.versions() == [4, 5]
    with pytest.raises(VersionNotRetainedError, match="version 3, which it applies to"):
        log.append(4, [(b"k", b"v")])


def test_changelog_first_version_above_zero_starts_from_empty_snapshot(tmp_path, make_store):
    log = Changelog(str(tmp_path / "log"))
    log.append(7, [(b"k", b"v")])
    assert log.snapshot_versions() == [6] and log.versions() == [6, 7]
    store = make_store("s")
    restore(log, store, 7)
    assert dict(store.scan()) == {b"k": b"v"}


def test_changelog_append_rejects_non_bytes_and_writes_nothing(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    for bad in ([("k", b"v")], [(b"k", None)], [(b"k",)], [b"k"]):
        with pytest.raises(TypeError):
            log.append(0, bad)
    with pytest.raises(TypeError, match="delete keys must be bytes"):
        log.append(0, deletes=[1])
    assert log.versions() == [] and not os.path.exists(log.uri)


def test_changelog_interrupted_append_leaves_previous_versions(tmp_path, monkeypatch):
    log, _ = build(str(tmp_path / "log"), versions=3, snapshots=())
    before = sorted(os.listdir(log.uri))

    def crash(*args: object) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="disk gone"):
        log.append(3, [(b"k", b"v")])
    assert sorted(os.listdir(log.uri)) == before and log.versions() == [0, 1, 2]


def test_changelog_temporary_files_are_invisible(tmp_path):
    log, model = build(str(tmp_path / "log"), versions=3, snapshots=())
    for name in (".tmp-delta-00000000000000000003-1-0", ".tmp-snapshot-00000000000000000002-1-1"):
        with open(os.path.join(log.uri, name), "wb") as fh:
            fh.write(b"ARROW1 half written")
    assert log.versions() == [0, 1, 2]
    assert [t.name for t in log.listing().temps] == sorted(
        [".tmp-delta-00000000000000000003-1-0", ".tmp-snapshot-00000000000000000002-1-1"])


def test_changelog_snapshot_keys_must_ascend(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    keys = pa.array([b"b", b"a"], pa.large_binary())
    with pytest.raises(ChangelogError, match="strictly ascending"):
        log.write_snapshot(0, [(keys, keys)])
    assert os.listdir(log.uri) == []


def test_changelog_snapshot_bytes_are_canonical(tmp_path):
    log = Changelog(str(tmp_path / "log"))
    keys = pa.array([b"%06d" % i for i in range(100_000)], pa.large_binary())
    whole = log.write_snapshot(0, [(keys, keys)])
    os.remove(os.path.join(log.uri, whole.name))
    pieces = [(keys.slice(i, 7_777), keys.slice(i, 7_777)) for i in range(0, len(keys), 7_777)]
    assert log.write_snapshot(0, pieces).name == whole.name


def test_changelog_file_uri_is_local(tmp_path):
    log = Changelog(f"file://{tmp_path}/log")
    assert isinstance(log.storage, LocalStorage)
    log.append(0, [(b"k", b"v")])
    assert os.path.isdir(tmp_path / "log") and log.versions() == [0]


def test_changelog_on_another_pyarrow_filesystem(tmp_path, make_store):
    """A pyarrow filesystem that is not the local one (here a sub-tree view) goes through the
    generic path: write to a temporary name, move; read whole files; same checks."""
    fs = pafs.SubTreeFileSystem(str(tmp_path), pafs.LocalFileSystem())
    log = Changelog("ckpt/state/p=0", filesystem=fs, retain_versions=2)
    assert isinstance(log.storage, ArrowStorage)
    local = Changelog(str(tmp_path / "ckpt" / "state" / "p=0"))
    for version in range(4):
        write = write_for(version)
        log.append(version, write.puts, write.deletes, write.delete_ranges)
    compact(log, 2)
    assert compact(log).version == 3 and log.versions() == [2, 3]
    store = make_store("s")
    restore(log, store, 3)
    assert store.version == 3 and dict(store.scan())
    damaged = file_of(local, Kind.SNAPSHOT, 3)
    flip_byte(local, damaged)
    stats = restore(log, make_store("t"), 3)  # falls back to snapshot 2 and delta 3
    assert stats.base_version == 2 and damaged.name in stats.skipped[0]
    flip_byte(local, file_of(local, Kind.DELTA, 3))
    with pytest.raises(ChangelogError, match="every chain of files that reaches it is damaged"):
        restore(log, make_store("u"), 3)
    assert [type(p) for p in verify(log)][:2] == [ChecksumMismatchError, ChecksumMismatchError]
    assert [n for n in os.listdir(local.uri) if n.startswith(".tmp")] == []
