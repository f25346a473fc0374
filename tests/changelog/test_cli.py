"""``streamjoin changelog ...`` on real logs left by the runtime-like runner, run in-process."""

from __future__ import annotations

import json

import pytest

import streamjoin.changelog.cli
from streamjoin.changelog.format import Kind
from streamjoin.jobs.cli import main
from streamjoin.statestore import open_store
from tests.changelog.history import file_of, truncate
from tests.changelog.test_logging_store import WRITES, Runner


@pytest.fixture
def runner(tmp_path):
    """A log written through open_logged_store + ChangeloggingStore, compacted at version 3."""
    r = Runner("memory", str(tmp_path))
    for version, write in enumerate(WRITES):
        r.batch(version, write)
        if version == 3:
            assert main(["changelog", "compact", r.log.uri, "--retain", "10"]) == 0
    return r


def test_cli_inspect_lists_versions_files_and_ratio(runner, capsys):
    capsys.readouterr()
    assert main(["changelog", "inspect", runner.log.uri]) == 0
    out = capsys.readouterr().out
    assert "restorable versions: 0..5 (6 versions)" in out
    assert "snapshot-00000000000000000003-" in out and "delta-00000000000000000005-" in out
    assert "compaction ratio" in out


def test_cli_inspect_json_counts_entries(runner, capsys):
    capsys.readouterr()
    assert main(["changelog", "inspect", "--json", runner.log.uri]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["restorable"] == list(range(6))
    snapshot = [f for f in data["files"] if f["kind"] == "snapshot"][0]
    assert snapshot["entries"] == len(runner.model.states[3])


def test_cli_verify_passes_then_names_damage(runner, capsys):
    assert main(["changelog", "verify", runner.log.uri]) == 0
    assert "OK: " in capsys.readouterr().out
    torn = file_of(runner.log, Kind.DELTA, 4)
    truncate(runner.log, torn)
    assert main(["changelog", "verify", runner.log.uri]) == 1
    out = capsys.readouterr().out
    assert f"DAMAGE (TornFileError): changelog file {torn.name}" in out
    assert "versions 4..5 cannot be restored" in out


def test_cli_compact_applies_retention(runner, capsys):
    assert main(["changelog", "compact", runner.log.uri, "--retain", "2"]) == 0
    out = capsys.readouterr().out
    assert "snapshot of version 5: wrote" in out and "deleted 4 files" in out  # deltas 0..3
    assert runner.log.versions() == [3, 4, 5]  # 4 and 5 need snapshot 3
    with pytest.raises(SystemExit) as info:
        main(["changelog", "compact", runner.log.uri, "--retain", "1"])
    assert info.value.code == 2 and "--retain must be an int >= 2" in capsys.readouterr().err
    assert main(["changelog", "compact", runner.log.uri, "--up-to", "2"]) == 1
    assert "no longer retained" in capsys.readouterr().err


@pytest.mark.parametrize("backend", ["memory", "rocksdb", "lmdb"])
def test_cli_restore_into_backend(runner, backend, tmp_path, capsys, monkeypatch):
    into = str(tmp_path / f"restored-{backend}")
    monkeypatch.setattr(streamjoin.changelog.cli, "PROGRESS_FROM", 1)
    assert main(["changelog", "restore", runner.log.uri, "--version", "4", "--backend", backend,
                 "--into", into]) == 0
    captured = capsys.readouterr()
    assert f"restored version 4 into {backend} store {into}" in captured.out
    assert "restore: 100%" in captured.err  # the progress bar
    with open_store(backend, into) as store:
        assert dict(store.scan()) == runner.model.states[4] and store.version == 4
    assert main(["changelog", "restore", runner.log.uri, "--backend", backend, "--into", into]) == 1
    assert "--force" in capsys.readouterr().err
    assert main(["changelog", "restore", runner.log.uri, "--backend", backend, "--into", into,
                 "--force", "--no-progress"]) == 0
    assert capsys.readouterr().err == ""
    with open_store(backend, into) as store:
        assert dict(store.scan()) == runner.model.states[5] and store.version == 5


def test_cli_restore_takes_store_options(runner, tmp_path, capsys):
    into = str(tmp_path / "restored")
    assert main(["changelog", "restore", runner.log.uri, "--version", "4", "--backend", "arranged",
                 "--store-option", "host=lmdb", "--store-option", "sync=true", "--into", into]) == 0
    with open_store("arranged", into, host="lmdb") as store:
        assert dict(store.scan()) == runner.model.states[4] and store.version == 4
    assert main(["changelog", "restore", runner.log.uri, "--backend", "arranged", "--store-option", "hots=lmdb",
                 "--into", str(tmp_path / "other")]) == 1
    assert "no option 'hots'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["changelog", "restore", runner.log.uri, "--store-option", "host", "--into", into])
    assert "give NAME=VALUE" in capsys.readouterr().err


def test_cli_restore_damaged_log_exits_1_naming_file(runner, tmp_path, capsys):
    torn = file_of(runner.log, Kind.DELTA, 5)
    truncate(runner.log, torn)
    assert main(["changelog", "restore", runner.log.uri, "--backend", "memory",
                 "--into", str(tmp_path / "x")]) == 1
    assert torn.name in capsys.readouterr().err


def test_cli_changelog_without_action_shows_usage(capsys):
    assert main(["changelog"]) == 2
    assert "inspect" in capsys.readouterr().err
    with pytest.raises(SystemExit) as info:
        main(["changelog", "restore", "--help"])
    assert info.value.code == 0 and "--backend" in capsys.readouterr().out


@pytest.mark.parametrize("action", ["inspect", "verify"])
def test_cli_inspect_and_verify_refuse_a_path_that_does_not_exist(action, tmp_path, capsys):
    missing = str(tmp_path / "ck" / "state" / "p=0")
    assert main(["changelog", action, missing]) == 1
    captured = capsys.readouterr()
    assert "OK" not in captured.out
    assert f"{missing} does not exist" in captured.err and "changelog directory of one operator partition" in captured.err


@pytest.mark.parametrize("action", ["inspect", "verify"])
def test_cli_inspect_and_verify_on_a_checkpoint_root_point_to_its_partitions(action, tmp_path, capsys):
    root = tmp_path / "ck"
    for p in (0, 1):
        (root / "state" / f"p={p}").mkdir(parents=True)
    (root / "definition.json").write_text("{}")
    assert main(["changelog", action, str(root)]) == 1
    err = capsys.readouterr().err
    assert f"{root} holds no changelog files" in err
    assert f"{root}/state/p=<p> (here p=0, p=1)" in err
    assert main(["changelog", action, str(root / "state")]) == 1
    assert f"{root}/state/p=<p> (here p=0, p=1)" in capsys.readouterr().err


def test_cli_restore_negative_version_names_the_argument_and_restorable_versions(runner, tmp_path, capsys):
    assert main(["changelog", "restore", runner.log.uri, "--version", "-1", "--backend", "memory",
                 "--into", str(tmp_path / "x")]) == 1
    assert "--version -1 is not a version" in capsys.readouterr().err
    assert main(["changelog", "compact", runner.log.uri, "--up-to", "-1"]) == 1
    err = capsys.readouterr().err
    assert "--up-to -1 is not a version" in err and "can restore 0..5 (6 versions)" in err


def test_cli_listing_negative_version_is_not_a_version(runner):
    error = runner.log.listing().unreachable(-1)
    assert "version -1 is not a version" in str(error) and "can restore 0..5" in str(error)
    assert runner.log.listing().chains(-1) == []
