"""Compaction: snapshots equal the state, retention keeps exactly what the newest versions need,
and a compaction racing an append or a rewrite never loses a version."""

from __future__ import annotations

import os

import pytest

from streamjoin.changelog import (
    Changelog,
    ChangelogConflictError,
    VersionOrderError,
    apply_retention,
    compact,
    restore,
    snapshot_from_store,
)
from streamjoin.changelog.format import Kind
from streamjoin.statestore import open_store
from tests.changelog.history import build, file_of, flip_byte, write_for
from tests.changelog.model import BACKENDS, Write


def _state(log: Changelog, version: int) -> dict[bytes, bytes]:
    file = log.listing().snapshots[version]
    snapshot = log.read_snapshot(file)
    return {k: v for keys, values in snapshot.chunks() for k, v in zip(keys.to_pylist(), values.to_pylist())}


def test_compact_snapshot_holds_live_entries_sorted(tmp_path):
    log, model = build(str(tmp_path / "log"), snapshots=())
    stats = compact(log)
    assert stats.version == 9 and stats.wrote
    assert _state(log, 9) == model.states[9] and stats.entries == len(model.states[9])
    assert stats.entries_read == sum(len(w.puts) + len(w.deletes) + len(w.delete_ranges)
                                     for w in model.writes.values())
    keys = [k for keys, _ in log.read_snapshot(log.listing().snapshots[9]).chunks() for k in keys.to_pylist()]
    assert keys == sorted(set(keys))


def test_compact_retention_keeps_exactly_what_newest_versions_need(tmp_path):
    log, _ = build(str(tmp_path / "log"), snapshots=(3, 6))
    stats = compact(log, 9, retain_versions=3)  # versions 7..9: snapshot 6 and deltas 7..9
    listing = log.listing()
    assert sorted(listing.snapshots) == [6, 9]
    assert sorted(listing.deltas) == [7, 8, 9]
    assert log.versions() == [6, 7, 8, 9]
    assert any(name.startswith("snapshot-00000000000000000003-") for name in stats.deleted)
    assert stats.bytes_deleted > 0
    for version in (10, 11):
        write = write_for(version)
        log.append(version, write.puts, write.deletes, write.delete_ranges)
    compact(log, 11, retain_versions=2)  # versions 10, 11: snapshot 9 and deltas 10, 11
    assert [(f.kind.value, f.version) for f in log.listing().files()] == [
        ("snapshot", 9), ("delta", 10), ("delta", 11), ("snapshot", 11)]
    assert log.versions() == [9, 10, 11]
    with pytest.raises(ValueError, match=">= 2"):
        compact(log, retain_versions=1)


def test_compact_again_keeps_good_snapshot(tmp_path):
    log, _ = build(str(tmp_path / "log"), snapshots=(9,))
    stats = compact(log, 9)
    assert not stats.wrote and stats.snapshot == file_of(log, Kind.SNAPSHOT, 9).name


def test_compact_replaces_damaged_snapshot(tmp_path):
    log, model = build(str(tmp_path / "log"), snapshots=(4, 9))
    damaged = file_of(log, Kind.SNAPSHOT, 9)
    flip_byte(log, damaged)
    stats = compact(log, 9)
    assert stats.wrote
    assert stats.snapshot == damaged.name  # the same state gives the same bytes, now intact
    assert log.listing().duplicates == ()
    assert _state(log, 9) == model.states[9]


def test_retention_keeps_fallback_of_damaged_base(tmp_path):
    log, model = build(str(tmp_path / "log"), snapshots=(4, 8))
    flip_byte(log, file_of(log, Kind.SNAPSHOT, 8))
    deleted, _ = apply_retention(log, retain_versions=2)
    assert all("snapshot-00000000000000000004" not in name for name in deleted)
    with open_store("memory", str(tmp_path / "s")) as store:
        assert restore(log, store, 9).base_version == 4
        assert dict(store.scan()) == model.states[9]


def test_compact_racing_append_keeps_new_versions(tmp_path):
    log, model = build(str(tmp_path / "log"), snapshots=())

    def append_meanwhile() -> None:  # between the snapshot's write and the cleanup
        for version in (10, 11):
            write = write_for(version)
            log.append(version, write.puts, write.deletes, write.delete_ranges)
            model.apply(version, write)

    stats = compact(log, 9, retain_versions=2, on_written=append_meanwhile)
    assert stats.version == 9
    assert log.versions() == [9, 10, 11]
    with open_store("memory", str(tmp_path / "s")) as store:
        restore(log, store, 11)
        assert dict(store.scan()) == model.states[11]


def test_compact_racing_rewrite_raises_conflict_and_keeps_log_consistent(tmp_path):
    log, model = build(str(tmp_path / "log"), snapshots=())
    other = Write(puts=[(b"other", b"x")])

    def rewrite_meanwhile() -> None:  # batch 9 executed again with other output
        log.append(9, other.puts)
        model.apply(9, other)

    with pytest.raises(ChangelogConflictError) as info:
        compact(log, 9, on_written=rewrite_meanwhile)
    assert info.value.versions == (9, 9)
    assert 9 not in log.snapshot_versions()
    with open_store("memory", str(tmp_path / "s")) as store:
        restore(log, store, 9)
        assert dict(store.scan()) == model.states[9]


def test_compact_removes_leftover_temp_files(tmp_path):
    log, _ = build(str(tmp_path / "log"), snapshots=())
    for version in (2, 12):
        with open(os.path.join(log.uri, f".tmp-delta-{version:020d}-99-0"), "wb") as fh:
            fh.write(b"half")
    compact(log, 8)
    compact(log, 9, retain_versions=2)  # keeps 8 and 9: everything before snapshot 8 goes
    temps = [n for n in os.listdir(log.uri) if n.startswith(".tmp-")]
    assert temps == [f".tmp-delta-{12:020d}-99-0"]  # a newer one may still be being written


@pytest.mark.parametrize("backend", BACKENDS)
def test_snapshot_from_store_equals_compacted_snapshot(tmp_path, backend):
    log, model = build(str(tmp_path / "log"), snapshots=(8,), retain=2)
    twin, _ = build(str(tmp_path / "twin"), snapshots=())
    with open_store(backend, str(tmp_path / backend)) as store:
        restore(log, store, 9)
        stats = snapshot_from_store(log, store, 9)
    assert stats.wrote and stats.entries == len(model.states[9])
    assert log.versions() == [8, 9]  # retention applied: 8 and 9 need only snapshot 8 on
    assert _state(log, 9) == model.states[9]
    assert compact(twin, 9).snapshot == stats.snapshot  # one state, one file name, however made


def test_snapshot_from_store_refuses_store_at_other_version(tmp_path):
    log, _ = build(str(tmp_path / "log"), snapshots=())
    with open_store("memory", str(tmp_path / "s")) as store:
        restore(log, store, 8)
        with pytest.raises(VersionOrderError, match="at 8"):
            snapshot_from_store(log, store, 9)
