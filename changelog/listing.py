"""What a changelog directory holds, and which versions its files can restore (no bytes are read).

A version ``v`` is restorable through a *chain*: a base, then the deltas after it up to ``v``. A base
is a snapshot at version ``b`` (the state as of ``b``) or the empty state before version 0 (then the
chain starts at delta 0). A log whose first version is ``k > 0`` begins with an empty snapshot at
``k - 1``, so every log states where it starts and a lost first delta is never mistaken for one.

Deltas that no chain reaches are *orphans*. Orphans older than every restorable version are
leftovers of an interrupted compaction (harmless; the next compaction removes them); any other
orphan means a delta or a snapshot is missing, which :meth:`Listing.damage` reports. So is a hole
between restorable versions: compaction deletes oldest first and a rewrite newest first, so
neither ever leaves one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from streamjoin.changelog.errors import (
    ChangelogCorruptError,
    ChangelogError,
    ChangelogGapError,
    MissingSnapshotError,
    VersionNotRetainedError,
)
from streamjoin.changelog.format import Kind, LogFile, file_name, parse_name, temp_version
from streamjoin.changelog.storage import TEMP_PREFIX, FileInfo

__all__ = ["Listing", "Chain", "runs"]


@dataclass(frozen=True)
class Chain:
    """How to restore ``target``: ``base`` (None: the empty state before 0), then ``deltas``."""

    target: int
    base: LogFile | None
    deltas: tuple[LogFile, ...]

    @property
    def base_version(self) -> int:
        return -1 if self.base is None else self.base.version

    @property
    def files(self) -> tuple[LogFile, ...]:
        return ((self.base,) if self.base is not None else ()) + self.deltas


@dataclass(frozen=True)
class Listing:
    """The parsed contents of a changelog directory at one moment."""

    uri: str
    deltas: dict[int, LogFile] = field(default_factory=dict)
    snapshots: dict[int, LogFile] = field(default_factory=dict)
    duplicates: tuple[LogFile, ...] = ()
    temps: tuple[FileInfo, ...] = ()
    others: tuple[FileInfo, ...] = ()

    @classmethod
    def from_files(cls, uri: str, infos: Iterable[FileInfo]) -> "Listing":
        deltas: dict[int, LogFile] = {}
        snapshots: dict[int, LogFile] = {}
        duplicates: list[LogFile] = []
        temps: list[FileInfo] = []
        others: list[FileInfo] = []
        for info in sorted(infos, key=lambda i: i.name):
            parsed = parse_name(info.name, info.size)
            table = {Kind.DELTA: deltas, Kind.SNAPSHOT: snapshots}.get(parsed.kind) if parsed else None
            if table is None or parsed is None:
                (temps if info.name.startswith(TEMP_PREFIX) else others).append(info)
            elif parsed.version in table:
                duplicates.append(parsed)
            else:
                table[parsed.version] = parsed
        return cls(uri, deltas, snapshots, tuple(duplicates), tuple(temps), tuple(others))

    @property
    def empty(self) -> bool:
        return not self.deltas and not self.snapshots

    @property
    def newest(self) -> int | None:
        """The newest version any file is for (restorable or not)."""
        return max([*self.deltas, *self.snapshots], default=None)

    def files(self) -> list[LogFile]:
        """Every published file, by version (snapshot after delta at one version)."""
        return sorted([*self.deltas.values(), *self.snapshots.values(), *self.duplicates])

    def restorable(self) -> list[int]:
        """Every version some chain of present files reaches, ascending."""
        bases = sorted(self.snapshots, reverse=True) + ([-1] if 0 in self.deltas else [])
        out: set[int] = set()
        for base in bases:
            if base >= 0:
                out.add(base)
            version = base + 1
            while version in self.deltas and version not in out:
                out.add(version)
                version += 1
        return sorted(out)

    def chains(self, target: int) -> list[Chain]:
        """Every chain of present files that reaches ``target``, newest base first (none for a
        negative ``target``: versions count from 0)."""
        if target < 0:
            return []
        bases = [s for s in sorted(self.snapshots, reverse=True) if s <= target] + [-1]
        out = []
        for base in bases:
            needed = range(base + 1, target + 1)
            if all(v in self.deltas for v in needed):
                snapshot = self.snapshots.get(base)
                out.append(Chain(target, snapshot, tuple(self.deltas[v] for v in needed)))
        return out

    def ambiguity(self, files: Iterable[LogFile]) -> ChangelogCorruptError | None:
        """An error if any of ``files`` has a duplicate (two files for one kind and version)."""
        for file in files:
            twins = [d for d in self.duplicates if (d.kind, d.version) == (file.kind, file.version)]
            if twins:
                names = [file.name, *(t.name for t in twins)]
                return ChangelogCorruptError(
                    f"changelog {self.uri} has {len(names)} {file.kind.value} files for version "
                    f"{file.version}: {', '.join(names)}; only one can be right. Keep the one "
                    "written last and delete the others (streamjoin never leaves two behind).",
                    files=names, versions=(file.version, file.version))
        return None

    def unreachable(self, target: int) -> ChangelogError:
        """Why no chain reaches ``target`` (call only when :meth:`chains` is empty)."""
        restorable = self.restorable()
        newest = self.newest
        if target < 0:
            return VersionNotRetainedError(
                f"version {target} is not a version: versions count from 0; changelog {self.uri} can "
                f"restore {_span(restorable) if restorable else 'no version'}", versions=(target, target))
        if newest is None:
            return VersionNotRetainedError(
                f"changelog {self.uri} is empty: there is no version {target} to restore",
                versions=(target, target))
        if target > newest:
            return VersionNotRetainedError(
                f"version {target} is newer than the newest version in changelog {self.uri} "
                f"({newest}); restore {newest} or an older version", versions=(target, target))
        if restorable and target < restorable[0]:
            return VersionNotRetainedError(
                f"version {target} is no longer retained in changelog {self.uri}: the oldest "
                f"restorable version is {restorable[0]} (compaction removed older files; "
                "raise retain_versions to keep more)", versions=(target, target))
        return self._gap_error(target, restorable)

    def _gap_error(self, target: int, restorable: list[int]) -> ChangelogGapError:
        below = [r for r in restorable if r < target]
        if below:
            missing = [v for v in range(below[-1] + 1, target + 1) if v not in self.deltas]
            return ChangelogGapError(
                f"version {target} cannot be restored from changelog {self.uri}: "
                f"{_plural(missing, 'the delta of version', 'the deltas of versions')} "
                f"{_span(missing)} {'is' if len(missing) == 1 else 'are'} missing "
                f"({_delta_pattern(missing[0])}); the newest "
                f"restorable version below it is {below[-1]}. Restore {below[-1]} or older, or "
                "rebuild the state by re-running the query from before the gap.",
                files=[_delta_pattern(v) for v in missing], versions=(missing[0], target))
        first = target
        while first - 1 in self.deltas:
            first -= 1
        pattern = file_name(Kind.SNAPSHOT, first - 1, 0).replace("00000000.arrow", "*.arrow")
        return MissingSnapshotError(
            f"version {target} cannot be restored from changelog {self.uri}: its deltas start at "
            f"{first} and need the snapshot of version {first - 1} ({pattern}), which is missing, "
            f"and no older snapshot or delta chain reaches it. Versions {first}..{self.newest} are "
            "lost from this changelog; re-run the query from a checkpoint before them.",
            files=[pattern], versions=(first - 1, target))

    def damage(self) -> list[ChangelogError]:
        """Missing files that some present delta needs (leftover old orphans are not damage)."""
        restorable = self.restorable()
        orphans = sorted(v for v in self.deltas if v not in set(restorable))
        errors: list[ChangelogError] = []
        for (_, _below), (above, _) in zip(runs(restorable), runs(restorable)[1:]):
            errors.append(self._gap_error(above - 1, restorable))  # a hole inside the history
        for first, last in runs(orphans):
            if restorable and last < restorable[0]:
                continue  # left over by an interrupted compaction; harmless
            errors.append(self.unreachable(first))
        for file in self.files():
            problem = self.ambiguity([file])
            if problem and file not in self.duplicates:
                errors.append(problem)
        return errors

    def leftovers(self) -> list[str]:
        """Names of files nothing needs: orphans older than every restorable version."""
        restorable = self.restorable()
        if not restorable:
            return []
        return [f.name for v, f in sorted(self.deltas.items()) if v < restorable[0]]

    def temps_up_to(self, version: int) -> list[str]:
        """Temporary files of versions ``<= version`` (no writer can still be working on them)."""
        out = []
        for info in self.temps:
            v = temp_version(info.name)
            if v is not None and v <= version:
                out.append(info.name)
        return out


def runs(versions: list[int]) -> list[tuple[int, int]]:
    """Consecutive runs in a sorted list: [1, 2, 3, 7, 8] -> [(1, 3), (7, 8)]."""
    out: list[tuple[int, int]] = []
    for v in versions:
        if out and v == out[-1][1] + 1:
            out[-1] = (out[-1][0], v)
        else:
            out.append((v, v))
    return out


def _span(versions: list[int]) -> str:
    return ", ".join(str(a) if a == b else f"{a}..{b}" for a, b in runs(versions))


def _plural(items: list, one: str, many: str) -> str:
    return one if len(items) == 1 else many


def _delta_pattern(version: int) -> str:
    return file_name(Kind.DELTA, version, 0).replace("00000000.arrow", "*.arrow")
