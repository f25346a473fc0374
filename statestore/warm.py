"""Open stores kept warm in this process between tasks, and handed over to another process.

Opening and closing a disk store costs tens of milliseconds a task (RocksDB reads its manifest
and table files, and flushes on close), while the next task of a partition often runs in the same
Python worker. :func:`park` keeps a store open after a task, keyed by its path; :func:`take` gives
it back to the next open of that path, only when its kind and options are the ones asked for, its
directory is the one it was opened on (not removed or replaced, not marked damaged), its files
pass the store's own check (:meth:`~streamjoin.statestore.base.Store.check_files`: LMDB's data
file not replaced or truncated) and its version marker is exactly the wanted version. Anything else closes the parked store and the caller
opens the directory as usual.

A store directory is owned by one handle at a time (:mod:`streamjoin.statestore.locking`): a
parked store keeps its locks, so there are never two writers. When another process needs the
directory (the partition's next task landed in another worker), its open finds the directory
locked and asks for it with :func:`request_release`: a request file beside the directory, which
a watcher thread of the parking process answers by closing the parked store (never one in use)
with ``Store.hand_over``, which lets an arranged store leave what it holds in memory for the
opener (``streamjoin.statestore.handover``). The watcher sleeps until a request file appears
beside a parked store (inotify, :class:`streamjoin.statestore.wakeup.Wakeup`) or a store is
parked; where that cannot be watched it looks every :data:`POLL_SECONDS`.
The opener retries for a bounded number of sleeps; a process that died released its locks with
it. At most :data:`LIMIT` stores stay parked per process (the least recently parked is closed).
The watcher also closes, every :data:`GONE_SECONDS`, a parked store whose directory was removed
or replaced (a finished query's checkpoint deleted): nothing can take it any more, and it would
hold a parked place, its memory and, through its open files, the removed files' disk space.

**Memos across a hand-over.** A store handed over leaves its memo
(:meth:`~streamjoin.statestore.base.Store.memo`: an operator's decoded copies of its state) in
this process, keyed by its path and directory, and the next open of that directory here adopts
it (:func:`adopt_memo`): with two workers a partition's tasks alternate between them, and each
worker's copy then only lacks what the other wrote meanwhile. Its users check, as always, that
an entry describes the store (its version) before using it. Parked stores and kept memos share
the :data:`LIMIT` places (the oldest memo leaves first), so the memory a worker keeps stays that
of ``LIMIT`` partitions.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

from streamjoin.statestore.base import Store
from streamjoin.statestore.locking import DAMAGE_FILE
from streamjoin.statestore.wakeup import Wakeup

__all__ = ["park", "take", "evict", "close_gone", "request_release", "parked_paths", "adopt_memo", "forget_memo",
           "kept_memos", "LIMIT", "RELEASE_SUFFIX"]

#: Stores kept open per process at most.
LIMIT = int(os.environ.get("STREAMJOIN_WARM_STORES", "8"))
#: A file ``<store path><RELEASE_SUFFIX>`` asks the process holding the store to close it.
RELEASE_SUFFIX = ".release"
#: The watcher's interval where it cannot sleep until a request file appears (no inotify), and
#: between the idle flushes of several newly parked stores. A hand-over waits for the watcher,
#: then for the opener's next retry, on the partition's path in every micro-batch whose task
#: landed in another worker (about half of them with two workers): at 20 ms each the waits were a
#: visible share of a pass-through's time. Polling at 5 ms took about 3% of a core a worker.
POLL_SECONDS = 0.005
#: The opener's retry interval, and how long it waits for a hand-over in all (10 s).
RETRY_SECONDS = 0.002
HANDOVER_POLLS = 5000
#: How often the watcher looks for parked stores whose directory is gone.
GONE_SECONDS = 1.0


@dataclass
class _Parked:
    kind: str
    options: dict[str, Any]
    store: Store
    identity: tuple[int, int] | None
    flushed: bool = False
    #: held by the watcher while it flushes the store; a take or an eviction waits for it
    busy: threading.Lock = field(default_factory=threading.Lock)


_PARKED: OrderedDict[str, _Parked] = OrderedDict()
#: the memos of stores handed over to another process: path -> (the directory's identity, memo)
_MEMOS: OrderedDict[str, tuple[tuple[int, int] | None, dict[str, Any]]] = OrderedDict()
_LOCK = threading.Lock()
_WATCHER: threading.Thread | None = None
_WATCHER_PID: int | None = None
_WAKEUP: Wakeup | None = None


def _identity(path: str) -> tuple[int, int] | None:
    """The directory's device and inode (None where there is no directory: a memory store)."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def park(kind: str, path: str, options: dict[str, Any], store: Store) -> None:
    """Keep ``store`` (open at ``path``) open for the next :func:`take` of ``path`` in this process;
    close it instead when parking is off (``LIMIT`` 0). Closes the least recently parked beyond it."""
    if LIMIT <= 0 or store.closed:
        store.close()
        return
    closing = []
    with _LOCK:
        old = _PARKED.pop(path, None)
        if old is not None and old.store is not store:
            closing.append(old.store)
        _PARKED[path] = _Parked(kind, dict(options), store, _identity(path))
        _MEMOS.pop(path, None)
        _trim_memos()
        while len(_PARKED) > LIMIT:
            closing.append(_PARKED.popitem(last=False)[1].store)
    for other in closing:
        _close_quietly(other)
    _ensure_watcher().poke()   # (watch beside the store, and flush it while it waits)


def take(kind: str, path: str, options: dict[str, Any], version: int | None) -> Store | None:
    """The store parked at ``path`` if it is the one wanted (kind, options, same directory, not
    marked damaged, version marker ``version``); otherwise close it and return None."""
    with _LOCK:
        parked = _PARKED.pop(path, None)
    if parked is None:
        return None
    with parked.busy:   # an idle flush in progress finishes first
        pass
    reusable = (parked.kind == kind and parked.options == dict(options) and not parked.store.closed
                and parked.identity == _identity(path) and not os.path.exists(os.path.join(path, DAMAGE_FILE)))
    try:
        if reusable and version is not None and parked.store.version == version:
            parked.store.check_files()   # its files replaced or cut under it: closed, reopened cold
            return parked.store
    except Exception:  # noqa: BLE001 - a store that cannot say its version, or whose files changed, is not reused
        pass
    _close_quietly(parked.store)
    return None


def evict(path: str, hand_over: bool = False) -> None:
    """Close the store parked at ``path`` in this process, if any (before removing or opening it),
    and any store parked under another path whose directory is now the one at ``path`` (moved
    there: it holds the directory's lock). ``hand_over``: another process asked for the store at
    ``path``, which is closed with ``Store.hand_over`` (it may leave what spares that open work)."""
    here = _identity(path)
    with _LOCK:
        moved = [p for p, e in _PARKED.items() if p != path and here is not None and e.identity == here]
        evicted = [(p, _PARKED.pop(p)) for p in [path, *moved] if p in _PARKED]
    for at, parked in evicted:
        with parked.busy:   # (a store moved here is closed: its hand-over would go to its old path)
            if hand_over and at == path:
                _keep_memo(path, parked)
            _close_quietly(parked.store, hand_over and at == path)


def _keep_memo(path: str, parked: _Parked) -> None:
    """Keep the memo of ``parked`` (about to be handed over) for the next open of ``path`` here,
    within the places :data:`LIMIT` leaves beside the parked stores."""
    try:
        memo = dict(parked.store.memo())
    except Exception:  # noqa: BLE001 - a closed or broken store has nothing worth keeping
        return
    if not memo:
        return
    with _LOCK:
        _MEMOS[path] = (parked.identity, memo)
        _MEMOS.move_to_end(path)
        _trim_memos()


def _trim_memos() -> None:
    """Drop the oldest kept memos while they and the parked stores take more than :data:`LIMIT`
    places (the caller holds ``_LOCK``)."""
    while _MEMOS and len(_PARKED) + len(_MEMOS) > LIMIT:
        _MEMOS.popitem(last=False)


def adopt_memo(path: str, store: Store) -> bool:
    """Give ``store``, just opened at ``path`` from its directory at the version its task
    wanted, the memo a store of this directory left when this process handed it over (if any, and
    the directory is still the one it was kept for); whether there was one. Its entries are what
    they were then: their users check the version they describe before using them."""
    with _LOCK:
        kept = _MEMOS.pop(path, None)
    if kept is None or kept[0] is None or kept[0] != _identity(path):
        return False
    store.memo().update(kept[1])
    return True


def forget_memo(path: str) -> None:
    """Drop the memo kept for ``path`` (its store was rebuilt, rolled or replaced: the memo's
    entries may describe writes the store no longer has)."""
    with _LOCK:
        _MEMOS.pop(path, None)


def kept_memos() -> list[str]:
    """The paths whose handed-over store left a memo in this process, oldest first."""
    with _LOCK:
        return list(_MEMOS)


def evict_all() -> None:
    """Close every parked store (at exit, and for tests)."""
    with _LOCK:
        parked = list(_PARKED.values())
        _PARKED.clear()
        _MEMOS.clear()
    for entry in parked:
        with entry.busy:
            _close_quietly(entry.store)


def close_gone() -> list[str]:
    """Close the parked stores whose directory is no longer the one they were opened on (removed,
    or replaced by another); their paths."""
    with _LOCK:
        gone = [p for p, e in _PARKED.items() if e.identity is not None and _identity(p) != e.identity]
        for path in [p for p, (identity, _) in _MEMOS.items() if identity is None or _identity(p) != identity]:
            del _MEMOS[path]
    for path in gone:
        evict(path)
    return gone


def parked_paths() -> list[str]:
    """The paths of the stores parked in this process, least recently parked first."""
    with _LOCK:
        return list(_PARKED)


def request_release(path: str, attempt: Callable[[], Store]) -> Store:
    """``attempt()`` (an open of ``path`` that found it locked) retried while another process is
    asked to close its parked store there; raises the last :class:`StoreLockedError` after
    :data:`HANDOVER_POLLS` intervals (the holder is using it, or does not park)."""
    from streamjoin.statestore.errors import StoreLockedError

    request = path + RELEASE_SUFFIX
    try:
        with open(request, "wb"):
            pass
    except OSError:
        return attempt()
    try:
        for _ in range(HANDOVER_POLLS):
            try:
                return attempt()
            except StoreLockedError:
                time.sleep(RETRY_SECONDS)
        try:
            return attempt()
        except StoreLockedError as exc:
            raise StoreLockedError(
                f"store {path} is still open in another process after {HANDOVER_POLLS} requests to hand it "
                f"over ({request}): that process is using it (another task of the same partition still "
                "running, such as a speculative copy) or does not answer requests (it is not a streamjoin "
                "task, or it is stopped). Spark retries the task; if it keeps failing, end the process that "
                "holds the store (the lock goes with it), or set spark.speculation=false") from exc
    finally:
        try:
            os.remove(request)
        except FileNotFoundError:
            pass


def _ensure_watcher() -> Wakeup:
    """This process's watcher thread, started if it is not running (a forked process starts its
    own); the wake-up that ends its sleep."""
    global _WATCHER, _WATCHER_PID, _WAKEUP
    with _LOCK:
        if _WATCHER is None or _WAKEUP is None or _WATCHER_PID != os.getpid() or not _WATCHER.is_alive():
            _WATCHER_PID, _WAKEUP = os.getpid(), Wakeup()
            _WATCHER = threading.Thread(target=_watch, args=(_WAKEUP,), name="streamjoin-warm-stores", daemon=True)
            _WATCHER.start()
        return _WAKEUP


def _watch(wakeup: Wakeup) -> None:
    """Close a parked store whose path has a release request (another process wants it), and
    flush parked stores once while they wait (RocksDB's memtable: the flush a close would do,
    off the task's path, so a parked store's memory and write-ahead log stay bounded). Sleeps
    until a request file appears beside a parked store, a store is parked or the next look for
    gone directories; polls where requests cannot be watched."""
    looked = time.monotonic()
    while True:
        with _LOCK:
            parked = list(_PARKED)
        wakeup.watch({os.path.dirname(p) for p in parked})   # (then look: a request made before is found)
        for path in [p for p in parked if os.path.exists(p + RELEASE_SUFFIX)]:
            evict(path, hand_over=True)
        if time.monotonic() - looked >= GONE_SECONDS:
            looked = time.monotonic()
            close_gone()
        with _LOCK:
            idle = next((p for p in _PARKED.values() if not p.flushed), None)
            if idle is not None:
                idle.busy.acquire()
        if idle is not None:
            try:
                flush = getattr(idle.store, "flush_idle", None)
                if flush is not None and not idle.store.closed:
                    flush()
            except Exception:  # noqa: BLE001 - a flush is an optimisation; the next open checks the store
                pass
            finally:
                idle.flushed = True
                idle.busy.release()
        wakeup.wait(POLL_SECONDS if idle is not None or not wakeup.notified else GONE_SECONDS)


def _close_quietly(store: Store, hand_over: bool = False) -> None:
    try:
        if hand_over:
            store.hand_over()
        else:
            store.close()
    except Exception:  # noqa: BLE001 - closing a store nobody uses any more; the next open checks it
        pass


atexit.register(evict_all)
