"""Changelogs of state stores: versioned deltas, compacted snapshots, exact restore (docs/design/semantics.md "State and recovery").

    from streamjoin.changelog import Changelog, open_logged_store, restore, compact

    log = Changelog("/checkpoints/q1/state/p=0", retain_versions=10)
    store, opened = open_logged_store("rocksdb", "/local/q1/p=0", log, target_version=None)
    store.write(puts=[(b"k", b"v")], version=0)     # delta 0, then the local store
    compact(log)                                      # snapshot of version 0, retention
    restore(log, open_store("lmdb", "/elsewhere"), 0) # the same state in another backend

Modules: :mod:`~streamjoin.changelog.log` (the log: append, list, read), :mod:`~streamjoin.changelog.format` (file names
and Arrow layouts), :mod:`~streamjoin.changelog.listing` (which files restore which versions),
:mod:`~streamjoin.changelog.merge` (folding deltas in Arrow), :mod:`~streamjoin.changelog.compaction`,
:mod:`~streamjoin.changelog.restore`, :mod:`~streamjoin.changelog.undo` and :mod:`~streamjoin.changelog.logging_store` (the store
wrapper), :mod:`~streamjoin.changelog.inspect` (what the CLI shows and verifies), :mod:`~streamjoin.changelog.errors`.
This package imports :mod:`statestore` and pyarrow only.
"""

from streamjoin.changelog.compaction import CompactStats, apply_retention, compact, snapshot_from_store
from streamjoin.changelog.errors import (
    ChangelogConflictError,
    ChangelogCorruptError,
    ChangelogError,
    ChangelogGapError,
    ChecksumMismatchError,
    MissingSnapshotError,
    StoreNotEmptyError,
    TornFileError,
    VersionNotRetainedError,
    VersionOrderError,
)
from streamjoin.changelog.log import Changelog
from streamjoin.changelog.logging_store import (
    ChangeloggingStore,
    OpenHow,
    OpenReport,
    open_logged_store,
    owner_tag,
    release_logged_store,
)
from streamjoin.changelog.restore import RestoreMethod, RestoreStats, restore

__all__ = [
    "ChangelogConflictError",
    "ChangelogCorruptError",
    "ChangelogError",
    "ChangelogGapError",
    "Changelog",
    "ChangeloggingStore",
    "ChecksumMismatchError",
    "CompactStats",
    "MissingSnapshotError",
    "OpenHow",
    "OpenReport",
    "RestoreMethod",
    "RestoreStats",
    "StoreNotEmptyError",
    "TornFileError",
    "VersionNotRetainedError",
    "VersionOrderError",
    "apply_retention",
    "compact",
    "open_logged_store",
    "owner_tag",
    "release_logged_store",
    "restore",
    "snapshot_from_store",
]
