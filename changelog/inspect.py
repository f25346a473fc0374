"""What a changelog holds, and whether it is intact: the data behind ``streamjoin changelog``.

:func:`describe` lists every file with its version, size and entry count (reading only Arrow
footers and record-batch headers unless ``check`` is set); :func:`verify` checks every file's
checksum, format, kind and version, and the continuity of the chains, and returns one error per
problem (an empty list means the log is intact). Leftover temporary files, orphans older than every
restorable version and unexpected files are reported but are not damage.

:func:`require_changelog` tells a changelog directory from a path that is not one (missing, a file,
or a directory without changelog files, such as a join's checkpoint root), so that a command never
reports an empty "intact" log for a mistyped path.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs

from streamjoin.changelog.errors import ChangelogCorruptError, ChangelogError
from streamjoin.changelog.format import Kind, LogFile, verified_reader
from streamjoin.changelog.listing import Listing
from streamjoin.changelog.log import Changelog
from streamjoin.changelog.storage import ArrowStorage

__all__ = ["FileSummary", "LogSummary", "describe", "verify", "require_changelog"]

_PARTITION = re.compile(r"p=\d+$")
_EXPECTED = ("expected the changelog directory of one operator partition, which holds "
             "delta-<version>-<crc>.arrow and snapshot-<version>-<crc>.arrow files "
             "(a join keeps one per partition: <checkpoint>/state/p=<p>)")


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


def require_changelog(log: Changelog) -> Listing:
    """The listing of ``log``; raises :class:`ChangelogError` when its directory is not a
    changelog (missing, a file, or without a single changelog file), saying what was expected
    and, for a join's checkpoint or state directory, where its partitions' changelogs are."""
    listing = log.listing()
    if listing.files() or listing.temps:
        return listing
    fs, root = _filesystem(log)
    kind = fs.get_file_info(root).type
    if kind == pafs.FileType.NotFound:
        raise ChangelogError(f"{log.uri} does not exist: {_EXPECTED}")
    if kind != pafs.FileType.Directory:
        raise ChangelogError(f"{log.uri} is a file, not a directory: {_EXPECTED}")
    raise ChangelogError(f"{log.uri} holds no changelog files: {_EXPECTED}{_hint(fs, root, log.uri)}")


def _filesystem(log: Changelog) -> tuple[pafs.FileSystem, str]:
    storage = log.storage
    if isinstance(storage, ArrowStorage):
        return storage.fs, storage.root
    return pafs.LocalFileSystem(), storage.root


def _directories(fs: pafs.FileSystem, path: str) -> list[str]:
    infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    return sorted(posixpath.basename(i.path.rstrip("/")) for i in infos if i.type == pafs.FileType.Directory)


def _partitions(fs: pafs.FileSystem, path: str) -> list[str]:
    return sorted((d for d in _directories(fs, path) if _PARTITION.match(d)), key=lambda d: int(d[2:]))


def _hint(fs: pafs.FileSystem, root: str, uri: str) -> str:
    """Where the changelogs are, when ``root`` is a join's state directory or checkpoint."""
    uri = uri.rstrip("/")
    here = _partitions(fs, root)
    if here:
        return f". This looks like a checkpoint's state directory: its changelogs are {uri}/p=<p> ({_names(here)})"
    children = _directories(fs, root)
    if "state" in children:
        found = _partitions(fs, posixpath.join(root, "state"))
        return (f". This looks like a join checkpoint: each partition's changelog is {uri}/state/p=<p>"
                + (f" ({_names(found)})" if found else " (none written yet)"))
    stages = [c for c in children if _partitions(fs, posixpath.join(root, c, "state"))]
    if stages:
        return (f". This looks like a checkpoint of a join with stages {stages}: each partition's changelog "
                f"is {uri}/<stage>/state/p=<p>")
    return ""


def _names(partitions: list[str]) -> str:
    shown = ", ".join(partitions[:4]) + (f", ... {partitions[-1]}" if len(partitions) > 4 else "")
    return f"here {shown}"
