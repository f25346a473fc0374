"""Undo without undo records, for a store that keeps its previous versions itself.

A backend whose class says ``streamjoin.statestore.base.Store.keeps_history`` (the arranged
store: its manifest keeps the newest previous versions' files) returns to an earlier version by
itself (``streamjoin.statestore.base.Store.roll_back``). ``StoreHistory`` gives
``streamjoin.changelog.logging_store.open_logged_store`` the interface of
``streamjoin.changelog.undo.UndoLog`` over that: recording a write is only telling the store
which changelog delta it applies (its ``streamjoin.statestore.base.Store.tag``, kept with the
version), so no value is read back and no file is written beside the store.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from streamjoin.statestore.base import KeyValue, Store

__all__ = ["StoreHistory"]


class StoreHistory:
    """The undo interface (``streamjoin.changelog.undo.UndoLog``'s) of the store ``store_of()`` returns."""

    #: A changelogged store need not keep the values it read for the next write's record.
    wants_reads = False
    #: Recording a write does not look at its entries (a column write need not become lists).
    wants_entries = False

    def __init__(self, store_of: Callable[[], Store], depth: int = 1) -> None:
        if depth < 1:
            raise ValueError(f"undo depth must be >= 1, not {depth}")
        self._store_of, self.depth = store_of, depth

    def __repr__(self) -> str:
        return f"StoreHistory(depth={self.depth})"

    def record(self, store: Store, version: int, puts: Sequence[KeyValue], deletes: Sequence[bytes],
               delete_ranges: Sequence[tuple[bytes, bytes]], delta_crc: int | None = None,
               known: Mapping[bytes, bytes | None] | None = None) -> None:
        """Tell ``store`` which delta its next write applies (it keeps that with the version) and
        how many versions to keep."""
        store.tag, store.history_depth = delta_crc, self.depth

    def discard(self, version: int) -> None:
        """Nothing to remove: a write that did not happen left no record."""

    def discard_after(self, version: int | None) -> None:
        """Nothing to remove: the store's history holds only versions before its own."""

    def clear(self) -> None:
        """The store changed by other means: its history no longer leads back along the log."""
        store = self._store_of()
        if not store.closed:
            store.forget_history()

    def rollback(self, store: Store, target: int) -> int | None:
        return store.roll_back(target)

    def applied_crc(self, version: int) -> int | None:
        return self._store_of().applied_tag(version)
