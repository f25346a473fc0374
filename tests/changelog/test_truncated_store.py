"""An LMDB store whose data file is cut short (while open, while kept warm, or while closed) gives
a named error or is rebuilt from the changelog; it never kills the process with SIGBUS. Each
scenario runs in a child process, so a signal fails the test instead of killing pytest."""

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


@pytest.mark.parametrize("scenario", sorted(_SCENARIOS))
def test_lmdb_truncated_data_file_is_an_error_or_a_rebuild_not_a_signal(tmp_path, scenario):
    script = _SETUP + textwrap.dedent(_SCENARIOS[scenario]) + "print('ok')\n"
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", (
        f"exit status {done.returncode} (negative: killed by that signal)\n{done.stderr[-3000:]}")
