"""Upgrading a checkpoint written by an earlier streamjoin to this one's format, offline.

Format 1 (streamjoin 0.2) kept a partition's event-time progress in ``progress/p=<p>/v=<v>.json``
and its metrics in ``metrics/v=<v>/p=<p>.json``, knew no key groups, and routed keys to partitions
by another hash than the key groups of format 2 (:mod:`streamjoin.runtime.keygroups`). Its
changelogs, set-aside rows, initial rows and query binding are already what format 2 reads, and
so are its state entries (a table-table join's key stage gains only the expiry index of a
retention, which 0.2 did not have).

:func:`migrate` therefore rewrites no state. For a stopped query's checkpoint it

1. finds the newest version every partition committed (its metrics record is a partition's last
   write of a version; a version some partitions committed and others not is left to the next run,
   which executes it again);
2. writes a commit record per partition for each version all partitions kept records of, carrying
   the global event-time progress up to it (the largest of the partitions' progress) and the
   partition's metrics;
3. records a partitioning epoch 1 (:mod:`streamjoin.runtime.rescale`) with the partition count
   the join will run with: the old changelogs stay where they are as epoch 0, marked
   ``migrated_from`` (their partitions were not routed by key group, so any key may be in any of
   them), and the first version each new partition runs rebuilds its state from all of them,
   keeping its own key groups, exactly as after ``checkpoint repartition``;
4. replaces ``streamjoin.json`` (format 2, key groups, an id; the definition in today's terms) and
   only then removes ``progress/`` and ``metrics/``; the old ``streamjoin.json`` is kept as
   ``format-1/streamjoin.json``.

Each step writes whole files and can be repeated: a migration cut short is finished by running
it again. A checkpoint already of format 2 is left alone (one cut short after step 4 has its old
records removed).
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from streamjoin.changelog import Changelog
from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.binding import FORMAT, MIGRATED_FROM, ROOT
from streamjoin.runtime.keygroups import DEFAULT_KEY_GROUPS, check_key_groups
from streamjoin.runtime.rescale import PARTITIONING

__all__ = ["Migration", "migrate", "MIGRATED_FROM", "OLD_ROOT", "RUNNING_SECONDS"]

#: Where the migration keeps the ``streamjoin.json`` it replaced.
OLD_ROOT = "format-1/streamjoin.json"
#: A checkpoint whose newest records are younger than this looks written by a running query.
RUNNING_SECONDS = 120.0

_OLD_FOLDERS = ("progress", "metrics")
_VERSION = re.compile(r"v=(\d+)(\.json)?$")
_PARTITION = re.compile(r"p=(\d+)(\.json)?$")


@dataclass(frozen=True)
class Migration:
    """What :func:`migrate` did to checkpoint ``uri``: migrated it from format ``from_format``
    (None: it was already of this format, nothing to do), keeping the state of ``version`` (the
    newest version every partition committed; None: none) in ``old_partitions`` partitions, to
    run with ``partitions`` partitions over ``key_groups`` key groups; ``records`` commit records
    written (or to write, in a dry run)."""

    uri: str
    from_format: int | None
    version: int | None
    old_partitions: int
    partitions: int
    key_groups: int
    records: int

    def to_json(self) -> dict[str, Any]:
        return {"checkpoint": self.uri, "from_format": self.from_format, "version": self.version,
                "old_partitions": self.old_partitions, "partitions": self.partitions,
                "key_groups": self.key_groups, "records": self.records}


def migrate(
    checkpoint: Checkpoint, *, partitions: int | None = None, key_groups: int | None = None,
    now: float | None = None, progress: Callable[[int, int], None] | None = None, dry_run: bool = False,
) -> Migration:
    """Migrate ``checkpoint`` (one join or stage; its query stopped) to this streamjoin's format
    (see module), to run with ``partitions`` (None: the count it ran with) over ``key_groups``
    (None: :data:`streamjoin.runtime.keygroups.DEFAULT_KEY_GROUPS`). ``progress(done, total)``
    follows the partitions checked. With ``dry_run`` everything is checked and the migration it
    would make returned, and nothing is written.

    Raises :class:`CheckpointMismatchError` for a location that is not a join checkpoint, a
    format this streamjoin cannot migrate, a checkpoint with no committed version (nothing to
    keep: start it anew), one whose changelog cannot restore the version to keep, and, with
    ``now`` (seconds since the epoch) given, one whose newest records are under
    :data:`RUNNING_SECONDS` old (a running query); :class:`JoinDefinitionError` for a partition
    count outside 1 to the key groups.
    """
    files = checkpoint.files
    root = files.read_json(ROOT)
    if root is None:
        raise CheckpointMismatchError(f"{checkpoint.uri} is not a join checkpoint (it has no {ROOT})")
    found = root.get("format")
    if found == FORMAT:
        for folder in _OLD_FOLDERS:   # (a migration cut short after its new root)
            if root.get(MIGRATED_FROM) is not None and files.exists(folder):
                files.delete_dir(folder)
        count = int(root.get("partitions") or 0)
        return Migration(checkpoint.uri, None, checkpoint.commits.newest_version(), count, count,
                         int(root.get("key_groups") or 0), 0)
    if found != 1:
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} has format {found!r}; this streamjoin migrates format 1 "
            f"(streamjoin 0.2) to {FORMAT}, and no other")
    old = int(root["partitions"])
    groups = DEFAULT_KEY_GROUPS if key_groups is None else key_groups
    new = old if partitions is None else partitions
    check_key_groups(groups, new)
    metrics = _records(checkpoint, "metrics", version_first=True)
    times = _records(checkpoint, "progress", version_first=False)
    complete = [v for v, parts in sorted(metrics.items()) if set(parts) >= set(range(old))]
    if not complete:
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} has no version every partition committed, so it holds no state to "
            "keep: delete it and start the join from it anew (with its query's Spark checkpoint)")
    version = complete[-1]
    if now is not None:
        age = now - files.modified(f"metrics/v={version}")
        if age < RUNNING_SECONDS:
            raise CheckpointMismatchError(
                f"checkpoint {checkpoint.uri} committed version {version} {age:.0f} s ago: a query looks to be "
                "running on it; stop it first (or pass --force if none is)")
    for p in range(old):
        log = Changelog(checkpoint.changelog_uri(p))
        if not log.listing().empty and version not in log.listing().restorable():
            raise log.listing().unreachable(version)
        if progress is not None:
            progress(p + 1, old)
    records = len(complete) * old
    if dry_run:
        return Migration(checkpoint.uri, 1, version, old, new, groups, records)
    inputs = max((len(t) for parts in times.values() for t in parts.values()), default=0)
    for v in complete:
        global_times = _largest([_progress_up_to(times, p, v) for p in range(old)], inputs)
        for p in range(old):
            checkpoint.commits.write(v, p, old, global_times, metrics[v][p])
    # every new partition rebuilds from all the old ones (which were not routed by key group)
    files.write_json(f"{PARTITIONING}/e=1.json", {"partitions": new})
    if not files.exists(OLD_ROOT):
        files.write_json(OLD_ROOT, root)
    files.write_json(ROOT, {
        "format": FORMAT, "definition": upgrade_definition(root["definition"]), "partitions": old,
        "mode": root.get("mode", "streaming"), "key_groups": groups, "id": uuid.uuid4().hex,
        MIGRATED_FROM: 1, **({"query_id": root["query_id"]} if "query_id" in root else {})})
    for folder in _OLD_FOLDERS:
        files.delete_dir(folder)
    return Migration(checkpoint.uri, 1, version, old, new, groups, records)


def upgrade_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A format-1 join definition in this streamjoin's terms: a table-table join's key stage
    (state layout 1, before retention's expiry index) is layout 2; the others are unchanged."""
    out = dict(definition)
    if out.get("kind") == "table_join_keys" and out.get("layout") == 1:
        out["layout"] = 2
    return out


def _records(checkpoint: Checkpoint, folder: str, *, version_first: bool) -> dict[int, dict[int, Any]]:
    """Format 1's records under ``folder``, as ``{version: {partition: content}}`` (metrics:
    ``v=<v>/p=<p>.json``) or ``{partition: {version: max times}}`` (progress: ``p=<p>/v=<v>.json``)."""
    files = checkpoint.files
    out: dict[int, dict[int, Any]] = {}
    outer_pattern, inner_pattern = (_VERSION, _PARTITION) if version_first else (_PARTITION, _VERSION)
    for outer in files.names(folder):
        first = outer_pattern.fullmatch(outer)
        if first is None:
            continue
        for inner in files.names(f"{folder}/{outer}"):
            second = inner_pattern.fullmatch(inner)
            if second is None or not inner.endswith(".json"):
                continue
            record = files.read_json(f"{folder}/{outer}/{inner}") or {}
            content = record if version_first else tuple(record.get("max_times") or ())
            out.setdefault(int(first.group(1)), {})[int(second.group(1))] = content
    return out


def _progress_up_to(times: Mapping[int, Mapping[int, tuple]], partition: int, version: int) -> tuple:
    """Partition ``partition``'s progress recorded at its newest version up to ``version``."""
    mine = times.get(partition, {})
    before = [v for v in mine if v <= version]
    return tuple(mine[max(before)]) if before else ()


def _largest(rows: list[tuple], width: int) -> tuple[int | None, ...]:
    out: list[int | None] = [None] * width
    for row in rows:
        for i, value in enumerate(row):
            if value is not None and (out[i] is None or value > out[i]):
                out[i] = value
    return tuple(out)
