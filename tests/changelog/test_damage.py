"""Each kind of damage raises an error naming the file and the versions; restore falls back to an
older snapshot when that still reaches the version, and verify reports the same damage."""

from __future__ import annotations

import logging
import os
import shutil

import pytest

from streamjoin.changelog import (
    ChangelogCorruptError,
    ChangelogGapError,
    ChecksumMismatchError,
    MissingSnapshotError,
    TornFileError,
    VersionNotRetainedError,
    restore,
)
from streamjoin.changelog.format import Kind
from streamjoin.changelog.inspect import verify
from tests.changelog.history import build, file_of, flip_byte, path_of, truncate


@pytest.fixture
def history(tmp_path):
    return build(str(tmp_path / "log"))


def _restored(log, store, version):
    stats = restore(log, store, version)
    return dict(store.scan()), stats


def test_restore_torn_delta_names_file_and_versions(history, make_store):
    log, _ = history
    torn = file_of(log, Kind.DELTA, 8)
    truncate(log, torn)
    with pytest.raises(TornFileError) as info:
        restore(log, make_store("s"), 9)
    assert torn.name in info.value.files and torn.name in str(info.value)
    assert info.value.versions == (8, 9)
    assert "torn" in str(info.value) and "verify" in str(info.value)


def test_restore_checksum_mismatch_names_file_and_versions(history, make_store):
    log, _ = history
    damaged = file_of(log, Kind.DELTA, 9)
    flip_byte(log, damaged)
    with pytest.raises(ChecksumMismatchError) as info:
        restore(log, make_store("s"), 9)
    assert info.value.files == (damaged.name,) and info.value.versions == (9, 9)
    assert f"its name says {damaged.crc:08x}" in str(info.value)


def test_restore_missing_delta_between_versions_names_the_gap(history, make_store):
    log, model = history
    os.remove(path_of(log, file_of(log, Kind.DELTA, 5)))
    with pytest.raises(ChangelogGapError) as info:
        restore(log, make_store("s"), 6)
    assert info.value.versions == (5, 6)
    assert "delta-00000000000000000005-*.arrow" in info.value.files
    assert "newest restorable version below it is 4" in str(info.value)
    assert _restored(log, make_store("t"), 8)[0] == model.states[8]  # snapshot 7 bridges the gap
    assert 5 not in log.versions() and 6 not in log.versions()


def test_restore_missing_snapshot_names_it(tmp_path, make_store):
    log, _ = build(str(tmp_path / "log"), snapshots=(7,), retain=2)
    assert log.versions() == [7, 8, 9]
    os.remove(path_of(log, file_of(log, Kind.SNAPSHOT, 7)))
    with pytest.raises(MissingSnapshotError) as info:
        restore(log, make_store("s"), 9)
    assert info.value.files == ("snapshot-00000000000000000007-*.arrow",)
    assert info.value.versions == (7, 9)


def test_restore_damaged_snapshot_falls_back_to_older_chain(history, make_store, caplog):
    log, model = history
    damaged = file_of(log, Kind.SNAPSHOT, 7)
    flip_byte(log, damaged)
    with caplog.at_level(logging.WARNING, logger="streamjoin.changelog.restore"):
        state, stats = _restored(log, make_store("s"), 9)
    assert state == model.states[9]
    assert stats.base_version == 4 and stats.deltas == 5
    assert len(stats.skipped) == 1 and damaged.name in stats.skipped[0]
    assert damaged.name in caplog.text


def test_restore_damaged_snapshot_without_fallback_names_it(tmp_path, make_store):
    log, _ = build(str(tmp_path / "log"), snapshots=(7,), retain=3)
    damaged = file_of(log, Kind.SNAPSHOT, 7)
    truncate(log, damaged)
    with pytest.raises(TornFileError) as info:
        restore(log, make_store("s"), 8)
    assert info.value.files == (damaged.name,) and info.value.versions == (7, 8)


def test_restore_renamed_file_is_refused(history, make_store):
    log, _ = history
    delta8 = file_of(log, Kind.DELTA, 8)
    delta9 = file_of(log, Kind.DELTA, 9)
    os.remove(path_of(log, delta9))
    renamed = delta8.name.replace("0008-", "0009-")
    shutil.copy(path_of(log, delta8), os.path.join(log.uri, renamed))
    with pytest.raises(ChangelogCorruptError) as info:
        restore(log, make_store("s"), 9)
    assert renamed in info.value.files and "not what its name says" in str(info.value)


def test_restore_duplicate_delta_names_both(history, make_store):
    log, _ = history
    delta9 = file_of(log, Kind.DELTA, 9)
    twin = delta9.name[:-len("00000000.arrow")] + "0badf00d.arrow"
    shutil.copy(path_of(log, delta9), os.path.join(log.uri, twin))
    with pytest.raises(ChangelogCorruptError) as info:
        restore(log, make_store("s"), 9)
    assert set(info.value.files) == {delta9.name, twin}


def test_restore_version_outside_log_is_not_retained(tmp_path, make_store):
    log, _ = build(str(tmp_path / "log"), snapshots=(7,), retain=2)
    with pytest.raises(VersionNotRetainedError, match="oldest restorable version is 7"):
        restore(log, make_store("s"), 3)
    with pytest.raises(VersionNotRetainedError, match="newer than the newest"):
        restore(log, make_store("t"), 12)


@pytest.mark.parametrize("damage", ["torn", "checksum", "missing-delta", "missing-snapshot"])
def test_verify_reports_each_kind_of_damage(tmp_path, damage):
    log, _ = build(str(tmp_path / "log"), snapshots=(4, 7), retain=4)
    assert verify(log) == []
    delta8 = file_of(log, Kind.DELTA, 8)
    if damage == "torn":
        truncate(log, delta8)
    elif damage == "checksum":
        flip_byte(log, delta8)
    elif damage == "missing-delta":
        os.remove(path_of(log, delta8))
    else:
        os.remove(path_of(log, file_of(log, Kind.SNAPSHOT, 7)))
        os.remove(path_of(log, file_of(log, Kind.SNAPSHOT, 4)))
    problems = verify(log)
    assert problems, damage
    text = "\n".join(str(p) for p in problems)
    if damage in ("torn", "checksum"):
        assert delta8.name in text and "versions 8..9 cannot be restored" in text
    elif damage == "missing-delta":
        assert "delta-00000000000000000008-*.arrow" in text
    else:
        assert "snapshot of version 4" in text
