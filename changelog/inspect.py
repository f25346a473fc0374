"""What a changelog holds, and whether it is intact: the data behind ``streamjoin changelog``.

:func:`describe` lists every file with its version, size and entry count (reading only Arrow
footers and record-batch headers unless ``check`` is set); :func:`verify` checks every file's
checksum, format, kind and version, and the continuity of the chains, and returns one error per
problem (an empty list means the log is intact). Leftover temporary files, orphans older than every
restorable version and unexpected files are reported but are not damage.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from streamjoin.changelog.errors import ChangelogCorruptError, ChangelogError
from streamjoin.changelog.format import Kind, LogFile, verified_reader
from streamjoin.changelog.listing import Listing
from streamjoin.changelog.log import Changelog

__all__ = ["FileSummary", "LogSummary", "describe", "verify"]


@dataclass(frozen=True)
class FileSummary:
    """One file: ``entries`` is None and ``problem`` set when it cannot be read."""

    name: str
    kind: Kind
    version: int
    size: int
    entries: int | None
    problem: str = ""


@dataclass(frozen=True)
class LogSummary:
    """A changelog at one moment (see :func:`describe`)."""

    uri: str
    files: tuple[FileSummary, ...]
    restorable: tuple[int, ...]
    temps: tuple[str, ...]
    leftovers: tuple[str, ...]
    others: tuple[str, ...]

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    @property
    def newest_snapshot(self) -> FileSummary | None:
        snapshots = [f for f in self.files if f.kind is Kind.SNAPSHOT and f.entries is not None]
        return max(snapshots, key=lambda f: f.version, default=None)

    @property
    def delta_entries(self) -> int:
        return sum(f.entries or 0 for f in self.files if f.kind is Kind.DELTA)

    @property
    def compaction_ratio(self) -> float | None:
        """Entries held in all files per live entry of the newest snapshot (None: no snapshot)."""
        newest = self.newest_snapshot
        if newest is None or not newest.entries:
            return None
        return sum(f.entries or 0 for f in self.files) / newest.entries


def describe(log: Changelog, *, check: bool = False) -> LogSummary:
    """Summarise ``log``; with ``check``, verify every file's checksum while counting entries."""
    listing = log.listing()
    files = tuple(_summary(log, f, check) for f in listing.files())
    return LogSummary(
        log.uri, files, tuple(listing.restorable()), tuple(t.name for t in listing.temps),
        tuple(listing.leftovers()), tuple(o.name for o in listing.others))


def verify(log: Changelog) -> list[ChangelogError]:
    """Every problem of ``log``: damaged files, missing deltas or snapshots, duplicates."""
    listing = log.listing()
    problems: list[ChangelogError] = list(listing.damage())
    for file in listing.files():
        try:
            verified_reader(log.storage.read(file.name), file)
        except ChangelogCorruptError as exc:
            problems.append(exc)
        except FileNotFoundError:
            continue  # removed by a compaction since the listing
    return problems + _unreachable_after_damage(listing, problems)


def _summary(log: Changelog, file: LogFile, check: bool) -> FileSummary:
    try:
        buffer = log.storage.read(file.name)
        reader = verified_reader(buffer, file) if check else pa.ipc.open_file(buffer)
        entries = sum(reader.get_batch(i).num_rows for i in range(reader.num_record_batches))
    except (ChangelogCorruptError, pa.ArrowInvalid, OSError) as exc:
        return FileSummary(file.name, file.kind, file.version, file.size, None, str(exc))
    return FileSummary(file.name, file.kind, file.version, file.size, entries)


def _unreachable_after_damage(listing: Listing, problems: list[ChangelogError]) -> list[ChangelogError]:
    """Versions that damaged files make unrestorable, beyond those files themselves."""
    damaged = {name for p in problems if isinstance(p, ChangelogCorruptError) for name in p.files}
    if not damaged:
        return []
    lost = []
    for version in listing.restorable():
        chains = listing.chains(version)
        if all(any(f.name in damaged for f in chain.files) for chain in chains):
            lost.append(version)
    if not lost:
        return []
    return [ChangelogCorruptError(
        f"changelog {listing.uri}: versions {lost[0]}..{lost[-1]} cannot be restored because of "
        f"the damaged files above ({len(lost)} versions); restore an older version or re-run the "
        "query from a checkpoint before them", files=sorted(damaged), versions=(lost[0], lost[-1]))]
