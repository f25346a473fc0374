"""Undo records: how to take a local store from version ``v`` back to ``v - 1`` without a rebuild.

Before a changelogged write of version ``v`` reaches the local store, :meth:`UndoLog.record`
saves, beside the store (``<store path>.undo/undo-<v>-<crc>.arrow``, never in the changelog), the
previous value of every key the write touches: keys put or deleted (read with ``multi_get``) and
the entries a range delete removes (read with ``scan``). Keys the write creates are recorded as
deletes. Applying the record is one atomic store write that also sets the marker back to ``v - 1``,
so returning a store that is ahead (a batch executed again) costs in proportion to that batch's
writes, not to the state.

Records are only trusted for a store whose history this log saw: whoever changes the store by
other means (roll-forward from the changelog, rebuild) calls :meth:`UndoLog.clear`. A damaged or
missing record makes :meth:`UndoLog.rollback` decline (the caller rebuilds instead).

Records are not fsynced. They are a shortcut, never the only copy of anything: like the local
store beside them (whose writes are not synced either), they survive a process crash, and what a
machine crash loses or tears is caught (a record is checked against its CRC, names the version
it returns to and the changelog delta it undoes) and costs a rebuild from the changelog.
"""

from __future__ import annotations

import logging
import os
from itertools import compress, repeat
from operator import is_, is_not, itemgetter
from typing import Any, Mapping, Sequence

import pyarrow as pa

from streamjoin.changelog.errors import ChangelogCorruptError
from streamjoin.changelog.format import (
    Kind,
    LogFile,
    decode_delta,
    encode_delta,
    file_name,
    parse_name,
    temp_tag,
    verified_reader,
)
from streamjoin.changelog.storage import LocalStorage
from streamjoin.statestore.base import KeyValue, Store

__all__ = ["UndoLog"]

_log = logging.getLogger(__name__)
_PREVIOUS = "streamjoin.previous_version"
_DELTA_CRC = "streamjoin.delta_crc"
_UNKNOWN = object()


class UndoLog:
    """The undo records of one local store, keeping those of the newest ``depth`` versions."""

    #: A record reuses the values the operator read (:class:`~streamjoin.changelog.logging_store.ChangeloggingStore` keeps them).
    wants_reads = True
    #: Recording a write reads the old values of its keys (a column write is given as lists).
    wants_entries = True

    def __init__(self, directory: str | os.PathLike[str], depth: int = 1) -> None:
        if depth < 1:
            raise ValueError(f"undo depth must be >= 1, not {depth}")
        self.directory = os.fspath(directory)
        self.depth = depth
        self._storage = LocalStorage(self.directory, sync=False)

    def __repr__(self) -> str:
        return f"UndoLog({self.directory!r}, depth={self.depth})"

    def record(
        self,
        store: Store,
        version: int,
        puts: Sequence[KeyValue],
        deletes: Sequence[bytes],
        delete_ranges: Sequence[tuple[bytes, bytes]],
        delta_crc: int | None = None,
        known: Mapping[bytes, bytes | None] | None = None,
    ) -> None:
        """Save how to undo this write on ``store`` (call before the store applies it).

        ``delta_crc`` identifies the changelog delta of this write, so that a later open can
        tell whether the store holds the delta the log has now (see :meth:`applied_crc`).
        ``known``: values of keys in ``store`` now (None: absent), e.g. what the operator read
        this version; only the other touched keys are read (one ``multi_get``).
        """
        put_keys = list(map(itemgetter(0), puts))
        touched = list(dict.fromkeys(put_keys + list(deletes))) if deletes else list(dict.fromkeys(put_keys))
        ranged: dict[bytes, bytes] = {}
        for start, end in delete_ranges:
            if start < end:
                ranged.update(store.scan(start, end))
        # the old value of every touched key, without a Python step per key where C can do it
        olds: list[Any]   # bytes, None (absent) or _UNKNOWN (not read yet)
        if not known:
            olds = list(store.multi_get(touched))
        else:
            olds = list(map(known.get, touched, repeat(_UNKNOWN)))
        if known and any(map(is_, olds, repeat(_UNKNOWN))):
            unread = [i for i, old in enumerate(olds) if old is _UNKNOWN]
            for i, old in zip(unread, store.multi_get([touched[i] for i in unread])):
                olds[i] = old
        previous = dict(ranged)
        previous.update(compress(zip(touched, olds), map(is_not, olds, repeat(None))))
        undo_deletes = list(compress(touched, map(is_, olds, repeat(None))))  # absent now
        if deletes:  # deleting an absent key needs no undo; creating one is undone by a delete
            created = set(put_keys)
            undo_deletes = [k for k in undo_deletes if k in created]
        if ranged:
            undo_deletes = [k for k in undo_deletes if k not in ranged]
        prior = store.version
        batch = encode_delta(Kind.UNDO, version, list(previous.items()), undo_deletes, [],
                             extra={_PREVIOUS: "" if prior is None else str(prior),
                                    _DELTA_CRC: "" if delta_crc is None else f"{delta_crc:08x}"})
        # older records and any of this version or later go first
        self._storage.delete([f.name for f in self._files()
                              if f.version >= version or f.version <= version - self.depth], sync=False)
        self._storage.write_atomic(temp_tag(Kind.UNDO, version), lambda sink: _write(sink, batch),
                                   lambda crc: file_name(Kind.UNDO, version, crc))

    def discard(self, version: int) -> None:
        """Remove the record of ``version`` and newer ones (a write that did not happen)."""
        self._storage.delete([f.name for f in self._files() if f.version >= version])

    def discard_after(self, version: int | None) -> None:
        """Remove records of versions after ``version`` (None: all of them)."""
        floor = -1 if version is None else version
        self._storage.delete([f.name for f in self._files() if f.version > floor])

    def clear(self) -> None:
        """Remove every record (the store changed by other means, or was removed)."""
        self._storage.delete([f.name for f in self._files()])

    def rollback(self, store: Store, target: int) -> int | None:
        """Take ``store`` back to ``target`` with the records; return how many versions it undid.

        Returns None, having changed nothing, when a record on the way is missing or damaged, or
        leads elsewhere than ``target``. Each step is one atomic write with its version marker.
        """
        steps = []
        version = store.version
        while version is not None and version > target:
            step = self._load(version)
            if step is None or step[0] is None:
                return None
            steps.append(step)
            version = step[0]
        if version != target:
            return None
        for previous, puts, deletes in steps:
            store.write(puts, deletes, (), version=previous)
        self.discard_after(target)
        return len(steps)

    def applied_crc(self, version: int) -> int | None:
        """The CRC of the changelog delta the store applied at ``version``, if a record says."""
        files = [f for f in self._files() if f.version == version]
        if len(files) != 1:
            return None
        try:
            reader = verified_reader(self._storage.read(files[0].name), files[0])
        except (ChangelogCorruptError, OSError):
            return None
        text = (reader.schema.metadata or {}).get(_DELTA_CRC.encode(), b"").decode()
        return int(text, 16) if text else None

    def _load(self, version: int) -> tuple[int | None, list[KeyValue], list[bytes]] | None:
        files = [f for f in self._files() if f.version == version]
        if len(files) != 1:
            return None
        try:
            delta = decode_delta(verified_reader(self._storage.read(files[0].name), files[0]), files[0])
        except (ChangelogCorruptError, OSError) as exc:
            _log.warning("undo record %s in %s is unusable (%s); rebuilding instead",
                         files[0].name, self.directory, exc)
            return None
        puts, deletes, _ = delta.as_write()
        text = delta.metadata.get(_PREVIOUS, "")
        return (int(text) if text else None), puts, deletes

    def _files(self) -> list[LogFile]:
        parsed = (parse_name(info.name, info.size) for info in self._storage.list())
        return [f for f in parsed if f is not None and f.kind is Kind.UNDO]


def _write(sink: object, batch: pa.RecordBatch) -> None:
    with pa.ipc.new_file(sink, batch.schema) as writer:
        writer.write_batch(batch)
