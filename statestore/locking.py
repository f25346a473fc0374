"""Store directories on disk: exclusive ownership, a shape check before opening, and removal.

A store directory belongs to one open handle at a time. :class:`DirectoryLock` takes an ``flock``
on a lock file inside the directory. ``flock`` locks belong to an open file description, so a
second open of the same path conflicts whether it comes from another process or from this one,
and the kernel drops the lock when the holder exits or crashes: a Spark worker that dies never
leaves a store locked. Acquiring never blocks; a held lock raises :class:`StoreLockedError` at
once, and :func:`retry_locked` turns that into a bounded wait when the caller asks for one.

Stores never read a clock, so the bounded wait counts sleeps of a fixed interval instead.

Damage found after a store was opened (a checksum mismatch met by a read) is recorded in the
directory by :func:`mark_damaged`; from then on :func:`prepare_directory` refuses the directory
with :class:`StoreCorruptError`, so the next open (a retried task) rebuilds the store from its
changelog instead of reusing it. Errors the operating system reports (disk full, no permission)
are told apart from damage by :func:`os_refusal` and raised as :class:`StoreIOError`: they never
lead to a store being removed.
"""

from __future__ import annotations

import errno
import fcntl
import math
import os
import shutil
import time
from typing import Callable, TypeVar

from streamjoin.statestore.errors import StoreCorruptError, StoreError, StoreIOError, StoreLockedError

__all__ = [
    "DAMAGE_FILE",
    "DirectoryLock",
    "LOCK_FILE",
    "corrupt_message",
    "held_message",
    "io_error",
    "mark_damaged",
    "os_refusal",
    "prepare_directory",
    "remove_directory",
    "retry_locked",
]

#: The lock file's name inside a store directory.
LOCK_FILE = "streamjoin.lock"

#: Written into a store directory when a read finds damage; its presence refuses the directory.
DAMAGE_FILE = "streamjoin.damaged"

#: Operating-system errors that say nothing about a store's contents, with what to do about each.
_REFUSALS = {
    errno.ENOSPC: "free disk space (or point the local state directory at a larger disk)",
    errno.EDQUOT: "free disk space or raise the disk quota",
    errno.EACCES: "give this user read and write access to the directory",
    errno.EPERM: "give this user read and write access to the directory",
    errno.EROFS: "put the local state directory on a writable file system",
    errno.EMFILE: "raise the open-file limit (ulimit -n)",
    errno.ENFILE: "raise the system's open-file limit",
}

#: Seconds between attempts while waiting for a held store.
RETRY_INTERVAL = 0.05

T = TypeVar("T")


class DirectoryLock:
    """An exclusive ``flock`` on ``<directory>/streamjoin.lock``, held until :meth:`release`."""

    def __init__(self, directory: str, fd: int) -> None:
        self.directory = directory
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, directory: str) -> "DirectoryLock":
        """Lock ``directory`` (which must exist) or raise :class:`StoreLockedError` at once."""
        path = os.path.join(directory, LOCK_FILE)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise io_error(directory, f"cannot create the lock file {path}: {exc.strerror}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                raise StoreLockedError(held_message(directory)) from exc
            raise StoreError(f"cannot lock {path}: {exc.strerror}") from exc
        return cls(directory, fd)

    def release(self) -> None:
        """Drop the lock (idempotent). The lock file stays; it is harmless when unlocked."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor releases the flock

    def __repr__(self) -> str:
        return f"DirectoryLock({self.directory!r}, held={self._fd is not None})"


def held_message(path: str) -> str:
    """The message of a :class:`StoreLockedError` for ``path``."""
    return (
        f"store {path} is open in another process or by another handle in this process; "
        "close that handle first, or open the store with the option lock_timeout=<seconds> to wait for it "
        "(a join: store_options={'lock_timeout': <seconds>})"
    )


def retry_locked(attempt: Callable[[], T], lock_timeout: float | None) -> T:
    """Return ``attempt()``, retrying while it raises :class:`StoreLockedError`.

    With ``lock_timeout`` None or 0 there is one attempt. Otherwise attempts repeat every
    :data:`RETRY_INTERVAL` seconds for about ``lock_timeout`` seconds, then the last error is raised.
    """
    if lock_timeout is not None and lock_timeout < 0:
        raise ValueError(f"lock_timeout must be >= 0 seconds, not {lock_timeout}")
    retries = math.ceil(lock_timeout / RETRY_INTERVAL) if lock_timeout else 0
    for _ in range(retries):
        try:
            return attempt()
        except StoreLockedError:
            time.sleep(RETRY_INTERVAL)
    return attempt()


def prepare_directory(path: str, kind: str, markers: tuple[str, ...]) -> None:
    """Create ``path`` if missing; refuse one that holds files but is not a ``kind`` store.

    A directory is taken to be a ``kind`` store when it holds one of ``markers`` (files its
    library always writes), or nothing but our lock file. Raises :class:`StoreCorruptError`, also
    when :func:`mark_damaged` recorded damage in it.
    """
    if os.path.exists(path) and not os.path.isdir(path):
        raise StoreCorruptError(corrupt_message(path, kind, "it is a file, not a directory"))
    try:
        entries = set(os.listdir(path)) - {LOCK_FILE}
    except FileNotFoundError:
        entries = set()
    except OSError as exc:
        if exc.errno in _REFUSALS:
            raise io_error(path, f"cannot list {path}: {exc.strerror}", exc.errno) from exc
        raise StoreCorruptError(corrupt_message(path, kind, exc.strerror or str(exc))) from exc
    if DAMAGE_FILE in entries:
        raise StoreCorruptError(corrupt_message(path, kind, f"a read found it damaged: {_damage(path)}"))
    if entries and not entries.intersection(markers):
        found = ", ".join(sorted(entries)[:5])
        raise StoreCorruptError(corrupt_message(path, kind, f"it holds other files ({found})"))
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise io_error(path, f"cannot create the store directory {path}: {exc.strerror}") from exc


def corrupt_message(path: str, kind: str, detail: str) -> str:
    """The message of a :class:`StoreCorruptError`: what is wrong and what to do."""
    return (
        f"{path} is not a readable {kind} store ({detail}). Remove the directory "
        f"(streamjoin.statestore.destroy_store({kind!r}, path) or rm -r) and run again: the operator "
        "rebuilds the store from its changelog"
    )


def mark_damaged(path: str, kind: str, detail: str) -> StoreCorruptError:
    """Record in ``path`` that a read found damage (``detail``); return the error to raise.

    Best effort: when the record cannot be written (the disk is full, say) the error is still
    returned. Later opens of ``path`` raise :class:`StoreCorruptError` until it is removed.
    """
    try:
        fd = os.open(os.path.join(path, DAMAGE_FILE), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, detail.encode("utf-8", "replace"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return StoreCorruptError(corrupt_message(path, kind, f"damaged: {detail}"))


def _damage(path: str) -> str:
    try:
        with open(os.path.join(path, DAMAGE_FILE), encoding="utf-8", errors="replace") as fh:
            return fh.read(500) or "no detail recorded"
    except OSError as exc:
        return f"the damage record is unreadable ({exc.strerror})"


def os_refusal(message: str) -> int | None:
    """The errno of an operating-system refusal (disk full, no permission, ...) that a library
    error ``message`` reports, or None: such errors are not damage and never justify removal."""
    lowered = message.lower()
    for number in _REFUSALS:
        if os.strerror(number).lower() in lowered:
            return number
    return None


def io_error(path: str, detail: str, number: int | None = None) -> StoreIOError:
    """A :class:`StoreIOError` for ``path``: what failed, and what to do (the store is kept)."""
    if number is None:
        number = os_refusal(detail)
    advice = _REFUSALS.get(number, "fix the cause") if number is not None else "fix the cause"
    what = os.strerror(number).lower() if number is not None else "the operating system refused it"
    return StoreIOError(
        f"cannot use the store {path}: {what} ({detail}). The store was left as it is: "
        f"{advice} and run again"
    )


def remove_directory(path: str) -> None:
    """Remove a store directory that no handle holds; a missing path is fine.

    Raises :class:`StoreLockedError` while a handle (in any process) has the store open.
    """
    if not os.path.lexists(path):
        return
    if not os.path.isdir(path) or os.path.islink(path):
        os.remove(path)
        return
    lock = DirectoryLock.acquire(path)
    try:
        shutil.rmtree(path)
    except OSError as exc:
        raise StoreError(f"cannot remove the store directory {path}: {exc}") from exc
    finally:
        lock.release()
