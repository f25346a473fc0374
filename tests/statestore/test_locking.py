"""One handle per store directory: other processes and other handles get StoreLockedError at once.

Spark may run a partition's task in any Python worker, so these tests use real second processes
(the same interpreter, started fresh) as well as second handles in this process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import pytest

from streamjoin.statestore import StoreLockedError, destroy_store
from tests.statestore.conftest import DISK_BACKENDS, Backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Generous: a locked open must fail promptly, but the machine running the tests may be busy.
PROMPT_SECONDS = 10.0

TRY_OPEN = """
import json, sys, time
from streamjoin.statestore import StoreLockedError, open_store
start = time.monotonic()
try:
    open_store(sys.argv[1], sys.argv[2], **json.loads(sys.argv[3])).close()
    print("opened", time.monotonic() - start)
except StoreLockedError as exc:
    print("locked", time.monotonic() - start, exc)
"""

HOLD = """
import json, sys
from streamjoin.statestore import open_store
store = open_store(sys.argv[1], sys.argv[2], **json.loads(sys.argv[3]))
store.write(puts=[(b"held", b"1")], version=1)
print("ready", flush=True)
sys.stdin.read()  # hold until the parent closes stdin or kills us
"""


def python(code: str, *args: str, **popen: object) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen(
        [sys.executable, "-c", code, *args], cwd=ROOT, env=env, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, **popen,
    )


def try_open_elsewhere(backend: Backend, path: str) -> tuple[str, float, str]:
    proc = python(TRY_OPEN, backend.kind, path, json.dumps(dict(backend.options)))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    outcome, seconds, *message = out.split(" ", 2)
    return outcome, float(seconds), " ".join(message)


@pytest.fixture(params=DISK_BACKENDS, ids=lambda b: b.name)
def disk_backend(request: pytest.FixtureRequest) -> Backend:
    return request.param


def test_locking_other_process_is_refused_promptly(disk_backend: Backend, store_path: str) -> None:
    with disk_backend.open(store_path) as store:
        store.write(puts=[(b"a", b"1")])
        outcome, seconds, message = try_open_elsewhere(disk_backend, store_path)
        assert outcome == "locked" and seconds < PROMPT_SECONDS
        assert store_path in message
        assert store.get(b"a") == b"1"  # the holder is unaffected
    assert try_open_elsewhere(disk_backend, store_path)[0] == "opened"  # released by close


def test_locking_lock_is_released_when_the_holder_dies(disk_backend: Backend, store_path: str) -> None:
    holder = python(HOLD, disk_backend.kind, store_path, json.dumps(dict(disk_backend.options)), stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()
        with pytest.raises(StoreLockedError, match="another process"):
            disk_backend.open(store_path)
    finally:
        holder.kill()
        holder.communicate(timeout=60)
    with disk_backend.open(store_path) as store:  # the kernel dropped the dead holder's lock
        assert store.get(b"held") == b"1" and store.version == 1


def test_locking_same_process_second_open_is_refused(disk_backend: Backend, store_path: str) -> None:
    with disk_backend.open(store_path):
        start = time.monotonic()
        with pytest.raises(StoreLockedError, match="close that handle"):
            disk_backend.open(store_path)
        assert time.monotonic() - start < PROMPT_SECONDS


def test_locking_refusal_names_the_option_a_join_takes(disk_backend: Backend, store_path: str) -> None:
    # a join has no lock_timeout argument: the advice names where it goes (store_options)
    with disk_backend.open(store_path):
        with pytest.raises(StoreLockedError, match=r"store_options=\{'lock_timeout': <seconds>\}"):
            disk_backend.open(store_path)


def test_locking_lock_timeout_waits_then_refuses(disk_backend: Backend, store_path: str) -> None:
    with disk_backend.open(store_path):
        start = time.monotonic()
        with pytest.raises(StoreLockedError):
            disk_backend.open(store_path, lock_timeout=0.3)
        assert 0.25 <= time.monotonic() - start < PROMPT_SECONDS


def test_locking_lock_timeout_succeeds_once_released(disk_backend: Backend, store_path: str) -> None:
    first = disk_backend.open(store_path)
    first.write(puts=[(b"a", b"1")], version=5)
    releaser = threading.Timer(0.2, first.close)
    releaser.start()
    try:
        with disk_backend.open(store_path, lock_timeout=30) as second:
            assert second.version == 5 and second.get(b"a") == b"1"
    finally:
        releaser.join()


def test_locking_negative_lock_timeout_is_rejected(disk_backend: Backend, store_path: str) -> None:
    with pytest.raises(ValueError, match="lock_timeout"):
        disk_backend.open(store_path, lock_timeout=-1)


def test_destroy_store_refuses_a_store_open_in_another_process(disk_backend: Backend, store_path: str) -> None:
    holder = python(HOLD, disk_backend.kind, store_path, json.dumps(dict(disk_backend.options)), stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "ready", holder.stderr.read()
        with pytest.raises(StoreLockedError):
            destroy_store(disk_backend.kind, store_path)
    finally:
        holder.communicate(timeout=60)  # closes its stdin: the holder closes the store and exits
    with disk_backend.open(store_path) as store:
        assert store.get(b"held") == b"1"
