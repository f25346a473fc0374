"""The errors the changelog raises. Each names the files and versions involved and what to do.

    ChangelogError                    anything the changelog raised (a StreamjoinError)
    ├── ChangelogCorruptError         a file's bytes are damaged or are not a changelog file
    │   ├── TornFileError             the file is shorter than written (a torn or truncated write)
    │   └── ChecksumMismatchError     the file's bytes do not match the checksum in its name
    ├── ChangelogGapError             a delta that a version needs is missing
    │   └── MissingSnapshotError      deltas remain whose base snapshot is gone
    ├── VersionNotRetainedError       the version is older than the retained ones, or newer than the log
    ├── VersionOrderError             an append or write at a version that does not follow the last one
    ├── ChangelogConflictError        the log changed under an operation (retrying it is safe)
    └── StoreNotEmptyError            restore was given a store that already holds entries

Every error carries ``files`` (names inside the changelog directory) and ``versions`` (the first and
last version affected, or None) so callers and tests can act on them without parsing messages.
Store errors (:mod:`streamjoin.statestore.errors`) pass through unchanged.
"""

from __future__ import annotations

from typing import Iterable

from streamjoin.statestore.errors import StreamjoinError

__all__ = [
    "ChangelogError",
    "ChangelogCorruptError",
    "TornFileError",
    "ChecksumMismatchError",
    "ChangelogGapError",
    "MissingSnapshotError",
    "VersionNotRetainedError",
    "VersionOrderError",
    "ChangelogConflictError",
    "StoreNotEmptyError",
]


class ChangelogError(StreamjoinError):
    """Base class of every changelog error.

    ``files``: changelog file names involved; ``versions``: (first, last) versions affected.
    """

    def __init__(
        self, message: str, *, files: Iterable[str] = (), versions: tuple[int, int] | None = None
    ) -> None:
        super().__init__(message)
        self.files: tuple[str, ...] = tuple(files)
        self.versions = versions


class ChangelogCorruptError(ChangelogError):
    """A changelog file cannot be used: damaged bytes, a bad format, or an ambiguous duplicate."""


class TornFileError(ChangelogCorruptError):
    """A changelog file ends before its Arrow footer: it was cut short after it was written."""


class ChecksumMismatchError(ChangelogCorruptError):
    """A changelog file's CRC-32 differs from the one recorded in its name."""


class ChangelogGapError(ChangelogError):
    """A version cannot be reached: a delta between a base and the version is missing."""


class MissingSnapshotError(ChangelogGapError):
    """Deltas are present but the snapshot they start from (and every older route) is gone."""


class VersionNotRetainedError(ChangelogError):
    """The version asked for is outside what the changelog can restore."""


class VersionOrderError(ChangelogError):
    """A write names a version that does not follow the state it would apply to."""


class ChangelogConflictError(ChangelogError):
    """Another writer changed a file this operation depended on; nothing was lost, retry it."""


class StoreNotEmptyError(ChangelogError):
    """``restore`` needs an empty store; remove the old one (``destroy_store``) and open it again."""
