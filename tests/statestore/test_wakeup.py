"""streamjoin.statestore.wakeup: a wait that a file created in a watched directory, or a poke from
another thread, ends; a poll where inotify is not there."""

from __future__ import annotations

import ctypes
import errno
import os
import sys
import threading

import pytest

from streamjoin.statestore import wakeup as wakeup_module
from streamjoin.statestore.wakeup import Wakeup

LONG = 60.0   # a wait that only its event ends within the test's bounded join


def _waiting(w: Wakeup) -> threading.Thread:
    thread = threading.Thread(target=w.wait, args=(LONG,), daemon=True)
    thread.start()
    return thread


def test_wakeup_is_notified_on_linux() -> None:
    assert Wakeup().notified is sys.platform.startswith("linux")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
@pytest.mark.parametrize("how", ["create", "move"])
def test_wakeup_wait_ends_when_a_file_appears_in_a_watched_directory(tmp_path, how: str) -> None:
    watched = tmp_path / "state"
    watched.mkdir()
    w = Wakeup()
    w.watch({str(watched)})
    thread = _waiting(w)
    if how == "create":
        (watched / "p=0.release").write_bytes(b"")
    else:   # (a file written elsewhere and renamed into place)
        (tmp_path / "made").write_bytes(b"")
        os.replace(tmp_path / "made", watched / "p=0.release")
    thread.join(LONG / 2)
    assert not thread.is_alive()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_wakeup_directory_made_again_at_the_same_path_is_watched_again(tmp_path) -> None:
    watched = tmp_path / "state"
    watched.mkdir()
    w = Wakeup()
    w.watch({str(watched)})
    watched.rmdir()   # (a finished query's state removed: the kernel ends the watch)
    watched.mkdir()   # (the next query's, at the same path)
    w.wait(0.01)
    w.watch({str(watched)})
    assert w.notified
    thread = _waiting(w)
    (watched / "p=0.release").write_bytes(b"")
    thread.join(LONG / 2)
    assert not thread.is_alive()


def test_wakeup_poke_ends_a_wait_and_a_wait_consumes_it(tmp_path) -> None:
    w = Wakeup()
    w.watch({str(tmp_path)})
    thread = _waiting(w)
    w.poke()
    thread.join(LONG / 2)
    assert not thread.is_alive()
    w.poke()
    w.poke()   # (pokes pending are one)
    w.wait(LONG)
    thread = _waiting(w)
    thread.join(0.2)
    assert thread.is_alive()   # nothing pending: this wait lasts until the next poke
    w.poke()
    thread.join(LONG / 2)
    assert not thread.is_alive()


def test_wakeup_without_inotify_watches_nothing_and_still_wakes_on_a_poke(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(wakeup_module, "_inotify", lambda: (None, None))
    w = Wakeup()
    w.watch({str(tmp_path)})
    assert not w.notified
    w.wait(0.01)   # (a timeout ends it)
    thread = _waiting(w)
    w.poke()
    thread.join(LONG / 2)
    assert not thread.is_alive()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_wakeup_a_directory_that_is_gone_is_not_watched_until_it_is_there(tmp_path) -> None:
    w = Wakeup()
    missing = tmp_path / "missing"
    w.watch({str(missing)})
    assert w.notified   # (a parked store whose directory was removed: nothing to watch there)
    missing.mkdir()
    w.watch({str(missing)})
    thread = _waiting(w)
    (missing / "p=0.release").write_bytes(b"")
    thread.join(LONG / 2)
    assert not thread.is_alive()


def test_wakeup_a_directory_the_kernel_refuses_turns_notification_off(tmp_path) -> None:
    class Refusing:   # (the kernel's watch limit reached)
        def inotify_add_watch(self, *args: object) -> int:
            ctypes.set_errno(errno.ENOSPC)
            return -1

    w = Wakeup()
    if not w.notified:
        return   # (nothing to turn off where there is no inotify)
    w._libc = Refusing()
    w.watch({str(tmp_path)})
    assert not w.notified   # the caller polls from then on
    thread = _waiting(w)
    w.poke()
    thread.join(LONG / 2)
    assert not thread.is_alive()
