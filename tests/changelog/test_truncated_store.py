"""An LMDB store whose data file is cut short (while open, while kept warm, or while closed) gives
a named error or is rebuilt from the changelog; it never kills the process with SIGBUS. So is an
arranged store hosted in LMDB (``lmdb``) whose database file is cut short or has damaged pages.
Each scenario runs in a child process, so a signal fails the test instead of killing pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

_SETUP = """
import os, sys
from streamjoin.changelog import Changelog, OpenHow, open_logged_store, release_logged_store
from streamjoin.statestore import StoreTruncatedError, open_store, warm

path, log = sys.argv[1] + "/p=0", Changelog(sys.argv[1] + "/log")
PUTS = [(b"k%06d" % i, b"v" * 200) for i in range(20000)]

def commit(version, puts):
    store, _ = open_logged_store("lmdb-kv", path, log, version - 1 if version else None, warm=True)
    store.write(puts, (), (), version=version)
    release_logged_store(store)
    return store.inner

def truncate():
    os.truncate(os.path.join(path, "data.mdb"), 4 * 4096)
"""

_SCENARIOS = {
    "warm": """
        commit(0, PUTS)
        truncate()                      # the store is parked, its file mapped
        store, report = open_logged_store("lmdb-kv", path, log, 0, warm=True)
        assert report.how is OpenHow.REBUILT, report
        assert dict(store.scan()) == dict(PUTS)
        store.close()
    """,
    "cold": """
        commit(0, PUTS)
        warm.evict_all()
        truncate()
        try:
            open_store("lmdb-kv", path)
        except StoreTruncatedError as exc:
            assert "truncated" in str(exc), exc
        else:
            raise AssertionError("a truncated store opened")
        store, report = open_logged_store("lmdb-kv", path, log, 0)
        assert report.how is OpenHow.REBUILT and dict(store.scan()) == dict(PUTS), report
        store.close()
    """,
    "open": """
        store = open_store("lmdb-kv", path)
        store.write(PUTS, version=0)
        truncate()
        try:
            store.check_files()
        except StoreTruncatedError as exc:
            assert "truncated" in str(exc), exc
        else:
            raise AssertionError("check_files passed a truncated store")
        store.close()
    """,
}


_ARRANGED_SETUP = """
import os, sys
from streamjoin.changelog import Changelog, OpenHow, open_logged_store, release_logged_store

path, log = sys.argv[1] + "/p=0", Changelog(sys.argv[1] + "/log")
FILE = os.path.join(path, "arranged.mdb")

def puts(version):
    return [(b"k%06d" % i, b"v%d" % version * 100) for i in range(version * 1000, version * 1000 + 3000)]

def commit(version):
    store, _ = open_logged_store("lmdb", path, log, version - 1 if version else None)
    store.write(puts(version), (), (), version=version)
    release_logged_store(store)

def expected(last):
    return dict(kv for version in range(last + 1) for kv in puts(version))
"""

_ARRANGED_SCENARIOS = {
    "truncated": """
        for version in range(3):
            commit(version)
        os.truncate(FILE, os.path.getsize(FILE) // 2)
        store, report = open_logged_store("lmdb", path, log, 2)
        assert report.how is OpenHow.REBUILT and dict(store.scan()) == expected(2), report
        store.close()
    """,
}


def _in_a_child(setup: str, scenario: str, root) -> None:
    """Run ``setup`` then ``scenario`` in a child Python; fail unless it printed ``ok``."""
    script = setup + textwrap.dedent(scenario) + "print('ok')\n"
    done = subprocess.run([sys.executable, "-c", script, str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        f"exit status {done.returncode} (negative: killed by that signal)\n{done.stderr[-3000:]}")


@pytest.mark.parametrize("scenario", sorted(_ARRANGED_SCENARIOS))
def test_lmdb_hosted_arranged_store_truncated_database_is_rebuilt_not_a_signal(tmp_path, scenario):
    _in_a_child(_ARRANGED_SETUP, _ARRANGED_SCENARIOS[scenario], tmp_path)


@pytest.mark.parametrize("scenario", sorted(_SCENARIOS))
def test_lmdb_truncated_data_file_is_an_error_or_a_rebuild_not_a_signal(tmp_path, scenario):
    _in_a_child(_SETUP, _SCENARIOS[scenario], tmp_path)


def test_lmdb_hosted_arranged_store_write_that_meets_a_damaged_page_is_retried_on_a_rebuilt_store(tmp_path, monkeypatch):
    # LMDB raises MDB_CORRUPTED on a write that meets a damaged page, after the version's delta is
    # in the changelog; the store opened as sound, so every retry failed the same way. The host now
    # marks the store, whose next open rebuilds it from the changelog.
    import lmdb

    from streamjoin.changelog import Changelog, OpenHow, open_logged_store, release_logged_store
    from streamjoin.statestore import StoreWriteError, hosts

    path, log = str(tmp_path / "p=0"), Changelog(str(tmp_path / "log"))
    puts = {v: [(b"k%06d" % i, b"v%d" % v) for i in range(v * 100, v * 100 + 300)] for v in range(4)}

    def commit(version):
        store, report = open_logged_store("lmdb", path, log, version - 1 if version else None)
        try:
            store.write(puts[version], (), (), version=version)
        finally:
            release_logged_store(store)
        return report

    def damaged_commit(self, changes):
        with hosts._lmdb_errors(self._path, "writing"):
            raise lmdb.CorruptedError("mdb_put: MDB_CORRUPTED: Located page was wrong type")

    for version in range(2):
        commit(version)
    with monkeypatch.context() as patch:
        patch.setattr(hosts.LMDBHost, "_commit", damaged_commit)
        with pytest.raises(StoreWriteError, match="its LMDB database is damaged"):
            commit(2)
    assert commit(2).how is OpenHow.REBUILT
    assert commit(3).how is not OpenHow.REBUILT
    store, _ = open_logged_store("lmdb", path, log, 3)
    assert dict(store.scan()) == {k: v for version in range(4) for k, v in puts[version]}
    store.close()
