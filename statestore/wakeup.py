"""Sleeping until a file is created in one of some directories, or until another thread pokes.

The warm-stores watcher (:mod:`streamjoin.statestore.warm`) answers another process's request
for a parked store: a file created beside the store's directory. Polling for it costs a wake-up
every few milliseconds for the life of every Python worker, and makes each hand-over wait for the
next poll. On Linux a :class:`Wakeup` waits on inotify (through ``ctypes``: three calls of the C
library) for files created or moved into the directories it watches, so the watcher sleeps until
a request comes and answers it at once; elsewhere, or where the kernel refuses inotify (its
watch limit reached), :attr:`Wakeup.notified` is False and the caller keeps polling. Either way
:meth:`Wakeup.poke` ends a wait early (a store was parked: the watcher has work).

Nothing here reads a clock: a wait is bounded by the timeout it is given.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import struct
import sys
from typing import Any

__all__ = ["Wakeup"]

#: inotify's events for a file created in a watched directory, or moved into it; and its note
#: that a watch ended (its directory removed).
_IN_CREATE, _IN_MOVED_TO, _IN_IGNORED = 0x100, 0x80, 0x8000
#: an inotify event's fixed part: watch, mask, cookie, length of the name that follows
_EVENT = struct.Struct("iIII")


class Wakeup:
    """A wait that ends when a file appears in a watched directory (:attr:`notified`), when
    :meth:`poke` is called, or at its timeout. ``watch`` and ``wait`` belong to one thread;
    ``poke`` may come from any."""

    def __init__(self) -> None:
        self._poked, self._poke = os.pipe()
        for fd in (self._poked, self._poke):
            os.set_blocking(fd, False)
        self._libc: Any
        self._inotify: int | None
        self._libc, self._inotify = _inotify()
        self._watches: dict[str, int] = {}   # directory -> its watch

    @property
    def notified(self) -> bool:
        """Whether a file created in a watched directory ends a wait (inotify is in use)."""
        return self._inotify is not None

    def watch(self, directories: set[str]) -> None:
        """Watch exactly ``directories`` from now on: a directory removed and made again at the
        same path is watched again (the kernel ends a watch with its directory, and a wait takes
        note); one that is gone is not watched. One the kernel refuses (its watch limit reached)
        turns notification off: the caller polls."""
        if self._inotify is None:
            return
        for gone in set(self._watches) - directories:
            self._libc.inotify_rm_watch(self._inotify, self._watches.pop(gone))
        for directory in directories - set(self._watches):
            wd = self._libc.inotify_add_watch(self._inotify, os.fsencode(directory), _IN_CREATE | _IN_MOVED_TO)
            if wd >= 0:
                self._watches[directory] = wd
            elif ctypes.get_errno() not in (errno.ENOENT, errno.ENOTDIR):   # (gone: nothing to ask for there)
                self._stop_notifying()
                return

    def wait(self, timeout: float) -> None:
        """Return when a file appears in a watched directory, after a :meth:`poke`, or after
        ``timeout`` seconds; what woke it is consumed."""
        fds = [self._poked] if self._inotify is None else [self._poked, self._inotify]
        ready, _, _ = select.select(fds, [], [], timeout)
        for fd in ready:
            data = _drain(fd)
            if fd == self._inotify:
                ended = _ended(data)
                self._watches = {d: wd for d, wd in self._watches.items() if wd not in ended}

    def poke(self) -> None:
        """End the current or next :meth:`wait` (from any thread)."""
        try:
            os.write(self._poke, b"!")
        except BlockingIOError:   # (pokes already pending: one is enough)
            pass

    def _stop_notifying(self) -> None:
        if self._inotify is not None:
            os.close(self._inotify)
        self._inotify, self._watches = None, {}


def _inotify() -> tuple[Any, int | None]:
    """The C library and a new non-blocking inotify descriptor; (None, None) where there is none."""
    if not sys.platform.startswith("linux"):
        return None, None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
        fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    except (OSError, AttributeError):
        return None, None
    return (libc, fd) if fd >= 0 else (None, None)


def _ended(events: bytes) -> set[int]:
    """The watches that inotify ``events`` say the kernel ended (their directory removed)."""
    ended, at = set(), 0
    while at + _EVENT.size <= len(events):
        wd, mask, _, length = _EVENT.unpack_from(events, at)
        if mask & _IN_IGNORED:
            ended.add(wd)
        at += _EVENT.size + length
    return ended


def _drain(fd: int) -> bytes:
    """Everything ``fd`` has to read now (whole inotify events: the kernel never splits one)."""
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks)
