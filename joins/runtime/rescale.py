"""Restarting a checkpoint with another partition count: partitioning epochs and their rebuild.

A checkpoint with key groups (:mod:`streamjoin.runtime.keygroups`) records each partition count
it is run with as a **partitioning epoch**: epoch 0 is the one ``streamjoin.json`` was created
with (changelogs ``state/p=<p>``); a run binding it with another count adds epoch ``n``
(``partitioning/e=<n>.json``, changelogs ``state/e=<n>/p=<p>``). Tasks always run in the newest
epoch, and refuse to run with another partition count (a query still running with the old one).

**Rebuild.** The first version ``v`` a partition ``p`` runs in epoch ``n`` finds its changelog
empty: it restores each old partition (epoch ``n-1``) whose key groups overlap its own, as of
``v-1``, keeps the entries of its own key groups (the operator's ``regroup`` hook,
:mod:`streamjoin.runtime.regroup`) and writes them as the snapshot of ``v-1`` in its new changelog.
The old changelogs are only read, so executing ``v`` again, or a crash anywhere in the rebuild,
starts over from the same inputs and writes the same snapshot (a snapshot file is written whole
or not at all).

**Watermark.** Every commit record carries the global event-time progress up to its version
(:meth:`streamjoin.runtime.checkpoint.commits.Commits.watermark_inputs`), so the first version of epoch ``n`` reads it from the old
epoch's records of ``v-1`` like any other version: a count going down loses no partition's progress. Set-aside rows and metrics are per version and stay where they are.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from streamjoin.changelog import Changelog, restore
from streamjoin.errors import CheckpointDamagedError, CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.binding import MIGRATED_FROM
from streamjoin.runtime.keygroups import check_key_groups, group_range, owners, routing_types
from streamjoin.runtime.operator import Operator
from streamjoin.runtime.registry import operator_class
from streamjoin.runtime.regroup import Ownership
from streamjoin.statestore import destroy_store, open_store
from streamjoin.statestore.base import Store
from streamjoin.statestore.columns import pair_chunks

__all__ = ["Epoch", "epochs", "current_epoch", "bind_partitions", "changelog_uri", "epoch_dir",
           "prepare_partition", "old_partitions", "lost_changelog", "epoch_has_run", "can_rescale", "Plan", "plan_repartition",
           "PARTITIONING", "state_epoch", "sources_of"]

#: The folder of the partitioning epochs' records, ``e=<n>.json``.
PARTITIONING = "partitioning"


@dataclass(frozen=True)
class Epoch:
    """Partitioning epoch ``number``: the checkpoint run with ``partitions`` partitions."""

    number: int
    partitions: int
    #: Whether its partitions own key-group ranges; False for epoch 0 of a checkpoint migrated
    #: from format 1 (:mod:`streamjoin.runtime.migrate`), whose keys were routed by another hash:
    #: any key may be in any of its partitions.
    keyed: bool = True


def epochs(checkpoint: Checkpoint, root: Mapping[str, Any] | None = None) -> list[Epoch]:
    """Every epoch of the checkpoint, oldest first (empty for a checkpoint never bound).
    ``root``: ``streamjoin.json`` if already read."""
    if root is None:
        root = checkpoint.binding.root()
    if root is None:
        return []
    out = [Epoch(0, int(root["partitions"]), keyed=root.get(MIGRATED_FROM) is None)]
    numbers = sorted(int(name[2:-5]) for name in checkpoint.files.names(PARTITIONING)
                     if name.startswith("e=") and name.endswith(".json") and name[2:-5].isdigit())
    for number in numbers:
        record = checkpoint.files.read_json(f"{PARTITIONING}/e={number}.json")
        if record is not None:
            out.append(Epoch(number, int(record["partitions"])))
    return out


def current_epoch(checkpoint: Checkpoint) -> Epoch:
    """The newest epoch (epoch 0 with no partitions for a checkpoint never bound)."""
    found = epochs(checkpoint)
    return found[-1] if found else Epoch(0, 0)


def can_rescale(operator: Operator | type[Operator]) -> bool:
    """Whether ``operator`` (or an operator class) splits its state by key group (overrides
    ``Operator.regroup``)."""
    cls = operator if isinstance(operator, type) else type(operator)
    return cls.regroup is not Operator.regroup


def bind_partitions(checkpoint: Checkpoint, partitions: int, operator: Operator | None = None,
                    root: Mapping[str, Any] | None = None) -> Epoch:
    """Make ``partitions`` the checkpoint's partition count (after :meth:`streamjoin.runtime.checkpoint.binding.Binding.bind`):
    the current epoch if it has that count, else a new epoch. Raises
    :class:`CheckpointMismatchError` for a change of an ``operator`` that cannot split its state,
    and for a change while
    initial rows routed for the old count wait for the first version; raises
    :class:`JoinDefinitionError` for more partitions than key groups. ``root``:
    ``streamjoin.json`` if already read (by the bind)."""
    if root is None:
        root = checkpoint.binding.root()
    groups = checkpoint.binding.key_groups(root)
    check_key_groups(groups, partitions)
    found = epochs(checkpoint, root)
    _refuse_impossible(checkpoint, found, groups)
    current = found[-1] if found else Epoch(0, 0)
    if current.partitions == partitions:
        return current
    if operator is not None and not can_rescale(operator) and checkpoint.commits.has_state():
        operator.regroup((), Ownership(groups, 0, partitions, ()))   # raises, saying why
    if checkpoint.initial.done() is not None and not checkpoint.commits.has_state():
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} holds initial rows routed to {current.partitions} partitions that "
            f"its first version has not taken yet; run that version with partitions={current.partitions} "
            "before changing the partition count")
    wanted = Epoch(current.number + 1, partitions)
    if not checkpoint.files.create_json(f"{PARTITIONING}/e={wanted.number}.json", {"partitions": partitions}):
        winner = current_epoch(checkpoint)
        if winner.partitions != partitions:
            raise CheckpointMismatchError(
                f"checkpoint {checkpoint.uri} was just rescaled to {winner.partitions} partitions by another "
                f"run; this one asks for {partitions}: run one query on a checkpoint at a time")
        return winner
    return wanted


def _refuse_impossible(checkpoint: Checkpoint, found: Sequence[Epoch], groups: int) -> None:
    """Raise :class:`CheckpointDamagedError` for a recorded epoch whose partition count no run can
    use (outside 1 to the key groups; an earlier release's repartition could record one), naming
    the record, before any task would divide by it."""
    for epoch in found:
        if not 1 <= epoch.partitions <= groups:
            record = "streamjoin.json" if epoch.number == 0 else f"{PARTITIONING}/e={epoch.number}.json"
            raise CheckpointDamagedError(
                f"{checkpoint.uri}/{record} records {epoch.partitions} partitions for partitioning epoch "
                f"{epoch.number}, which no run can use (1 to the join's {groups} key groups). If no run has used "
                "that record (a repartition with a bad count wrote it), delete it and run again; otherwise restore "
                "the checkpoint from a copy. `streamjoin checkpoint verify` lists what else is wrong",
                path=checkpoint.files.location(record))


def epoch_has_run(checkpoint: Checkpoint, found: Sequence[Epoch], number: int) -> bool:
    """Whether epoch ``number`` of ``found`` (:func:`epochs`) has committed a version: epoch 0
    once any version is committed; a later one when one of its changelogs holds any, or when the
    checkpoint committed a version after the newest the epochs before it hold (so this one did)."""
    newest = checkpoint.commits.newest_version()
    if newest is None:
        return False
    if number == 0:
        return True
    epoch = found[number]
    if any(not Changelog(changelog_uri(checkpoint, epoch, p)).listing().empty for p in range(epoch.partitions)):
        return True
    before = [Changelog(changelog_uri(checkpoint, e, p)).listing().newest
              for e in found[:number] for p in range(max(e.partitions, 0))]
    reached = max((v for v in before if v is not None), default=None)
    return reached is not None and newest > reached


def lost_changelog(uri: str, partition: int, epoch: Epoch, old_newest: int) -> CheckpointDamagedError:
    """The error for partition ``partition``'s changelog ``uri`` in ``epoch`` found empty although
    the epoch has committed versions: the old epoch's changelogs end at ``old_newest``, so the
    versions after it were committed in this epoch, and its state is lost."""
    return CheckpointDamagedError(
        f"changelog {uri} of partition {partition} in partitioning epoch {epoch.number} ({epoch.partitions} "
        f"partitions) is missing or empty, but this epoch has committed versions after {old_newest} (where the "
        "previous epoch's changelogs end): the partition's state is lost. Restore that directory from a copy "
        "of the checkpoint, or start the join from a new checkpoint location", path=uri)


def epoch_dir(epoch: Epoch) -> str:
    """The epoch's folder under ``state/`` (and under a local store root): '' for epoch 0."""
    return "" if epoch.number == 0 else f"e={epoch.number}/"


def changelog_uri(checkpoint: Checkpoint, epoch: Epoch, partition: int) -> str:
    """The URI of ``partition``'s changelog in ``epoch``."""
    if epoch.number == 0:
        return checkpoint.changelog_uri(partition)
    return checkpoint.files.location(f"state/{epoch_dir(epoch)}p={partition}")


def old_partitions(partition: int, new: int, old: int, groups: int) -> list[int]:
    """The partitions of the ``old`` count that own key groups ``partition`` of ``new`` owns."""
    start, end = group_range(partition, new, groups)
    if end <= start:
        return []
    return sorted(set(owners(np.arange(start, end), old, groups).tolist()))


def sources_of(partition: int, epoch: Epoch, previous: Epoch, groups: int) -> list[int]:
    """The partitions of ``previous`` whose state ``partition`` of ``epoch`` is rebuilt from: those
    owning its key groups, or all of them when ``previous`` is not routed by key group."""
    if not previous.keyed:
        return list(range(previous.partitions))
    return old_partitions(partition, epoch.partitions, previous.partitions, groups)


def state_epoch(checkpoint: Checkpoint, found: Sequence[Epoch] | None = None) -> Epoch:
    """The epoch whose changelogs hold the checkpoint's newest state: the newest one that has run
    (:func:`epoch_has_run`); until a new epoch's first run (after ``checkpoint repartition`` or
    ``checkpoint migrate``) that is the one before it. Epoch 0 with no partitions for a
    checkpoint never bound."""
    found = epochs(checkpoint) if found is None else found
    for epoch in reversed(found):
        if epoch.number == 0 or epoch_has_run(checkpoint, found, epoch.number):
            return epoch
    return Epoch(0, 0)


@dataclass(frozen=True)
class _Stores:
    """Where a rebuild restores the old partitions: backend, its options, the local root."""

    kind: str
    options: dict
    root: str
    retain_versions: int


def prepare_partition(
    operator: Operator, checkpoint: Checkpoint, store: str, store_options: dict, local_root: str,
    version: int, partition: int, partitions: int, retain_versions: int, *, root: Mapping[str, Any] | None = None,
) -> Epoch:
    """The epoch a task of ``partitions`` partitions runs in; before its partition's first version
    in a new epoch, its changelog is rebuilt from the old epoch (see module). Raises
    :class:`CheckpointMismatchError` when the checkpoint's partition count is not ``partitions``.
    ``root``: ``streamjoin.json`` if already read."""
    found = epochs(checkpoint, root)
    epoch = found[-1] if found else Epoch(0, partitions)
    if epoch.partitions != partitions:
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} is partitioned in {epoch.partitions} partitions now (partitioning "
            f"epoch {epoch.number}); this task runs one of {partitions}: another run rescaled it, so stop "
            "this query (one query runs on a checkpoint at a time)")
    if epoch.number > 0:
        _rebuild(operator, checkpoint, found, epoch.number, partition, version,
                 _Stores(store, store_options, local_root, retain_versions))
    return epoch


def _rebuild(operator: Operator, checkpoint: Checkpoint, found: Sequence[Epoch], number: int, partition: int,
             version: int, stores: _Stores) -> None:
    """Give ``partition`` of epoch ``number`` its state as of ``version - 1`` from epoch
    ``number - 1``, unless its changelog has any (first the old partitions it reads, the same
    way: a rescale that was cut short before they ran has left them empty)."""
    epoch = found[number]
    log = Changelog(changelog_uri(checkpoint, epoch, partition), retain_versions=stores.retain_versions)
    if number == 0 or not log.listing().empty:
        return
    previous = found[number - 1]
    groups = checkpoint.binding.key_groups()
    olds = sources_of(partition, epoch, previous, groups)
    for q in olds:
        _rebuild(operator, checkpoint, found, number - 1, q, version, stores)
    sources = [Changelog(changelog_uri(checkpoint, previous, q), retain_versions=stores.retain_versions)
               for q in olds]
    base = version - 1
    if base < 0 or all(s.listing().empty for s in sources):
        return   # the old epoch committed nothing: the partition starts empty
    reached = max(v for v in (s.listing().newest for s in sources) if v is not None)
    if base > reached:
        raise lost_changelog(log.uri, partition, epoch, reached)
    owned = Ownership(groups, partition, epoch.partitions, tuple(routing_types(operator.inputs)))
    digest = hashlib.sha256(checkpoint.uri.encode()).hexdigest()[:16]
    paths = [os.path.join(stores.root, digest, "rescale", f"e={number}", f"p={partition}", f"q={q}") for q in olds]
    opened: list[Store] = []
    try:
        for source, path in zip(sources, paths):
            destroy_store(stores.kind, path)
            opened.append(open_store(stores.kind, path, **stores.options))
            if not source.listing().empty:
                restore(source, opened[-1], base)
        entries = operator.regroup(opened, owned)
        log.write_snapshot(base, pair_chunks(entries))
    finally:
        for store, path in zip(opened, paths):
            store.close()
            destroy_store(stores.kind, path)



# -- the offline command (streamjoin checkpoint repartition) ---------------------------------------

#: A checkpoint whose newest records are younger than this looks written by a running query.
RUNNING_SECONDS = 120.0


@dataclass(frozen=True)
class Plan:
    """A change of partition count: for each new partition, the old partitions it is built from."""

    uri: str
    old: Epoch
    new: Epoch
    version: int | None
    sources: tuple[tuple[int, ...], ...]


def plan_repartition(
    checkpoint: Checkpoint, partitions: int, *, now: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Plan:
    """Check that ``checkpoint`` (one join or stage) can change to ``partitions`` partitions and
    record the new partitioning epoch; each new partition's state is rebuilt from the old ones by
    the next run's first version (on the executors, in parallel). Every old changelog is checked
    to restore the newest committed version (``progress(done, total)`` follows them).

    Raises :class:`JoinDefinitionError` unless ``partitions`` is an int from 1 to the checkpoint's
    key groups, and :class:`CheckpointMismatchError` for a checkpoint written before key groups, of a join
    that cannot split its state, with a version partly committed (a query running, or one that
    failed mid-version: let it finish or run it again first), repartitioned before and not run
    since (asking for that count again is nothing to do), or, with ``now`` (seconds since
    the epoch) given, whose newest metrics are under :data:`RUNNING_SECONDS` old (a running query)."""
    root = checkpoint.files.read_json("streamjoin.json")
    if root is None:
        raise CheckpointMismatchError(f"{checkpoint.uri} is not a join checkpoint (it has no streamjoin.json)")
    kind = root.get("definition", {}).get("kind")
    if root.get("key_groups") is None:
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} was written by a streamjoin before key groups, and cannot be "
            f"rescaled: run it with partitions={root.get('partitions')}, or start from a new checkpoint location")
    check_key_groups(root["key_groups"], partitions)
    if not can_rescale(operator_class(kind)) and checkpoint.commits.has_state():
        raise CheckpointMismatchError(
            f"{kind} cannot split its state by key group, so checkpoint {checkpoint.uri} keeps its partition count")
    found = epochs(checkpoint)
    old = found[-1] if found else current_epoch(checkpoint)
    version = checkpoint.commits.newest_version()
    if version is not None and old.number > 0 and not epoch_has_run(checkpoint, found, old.number):
        if partitions == old.partitions:
            return Plan(checkpoint.uri, old, old, version, tuple((p,) for p in range(partitions)))
        ran = next(e for e in reversed(found) if epoch_has_run(checkpoint, found, e.number))
        raise CheckpointMismatchError(
            f"checkpoint {checkpoint.uri} was already repartitioned to {old.partitions} partitions (partitioning "
            f"epoch {old.number}) and no run has used that yet: its state is still in the changelogs of its "
            f"{ran.partitions} partitions as of version {version}. Run the query once with partitions={old.partitions} (its first "
            "version rebuilds each partition), then change the partition count again")
    if version is not None:
        done = {r.partition for r in checkpoint.commits.records(version)
                if r.partition >= 0 and r.partitions == old.partitions}
        if len(done) < old.partitions:
            raise CheckpointMismatchError(
                f"checkpoint {checkpoint.uri}: version {version} is committed by {len(done)} of {old.partitions} "
                "partitions, so a query is running on it or failed in that version: stop the query, or run it "
                "again until the version completes, before changing the partition count")
        if now is not None:
            age = now - checkpoint.files.modified(f"commits/v={version}")
            if age < RUNNING_SECONDS:
                raise CheckpointMismatchError(
                    f"checkpoint {checkpoint.uri} committed version {version} {age:.0f} s ago: a query looks to "
                    "be running on it; stop it first (or pass --force if none is)")
    for q in range(old.partitions):
        log = Changelog(changelog_uri(checkpoint, old, q))
        if version is not None and not log.listing().empty and version not in log.listing().restorable():
            raise log.listing().unreachable(version)
        if progress is not None:
            progress(q + 1, old.partitions)
    new = bind_partitions(checkpoint, partitions)
    groups = int(root["key_groups"])
    sources = tuple(tuple(sources_of(p, new, old, groups)) for p in range(partitions))
    return Plan(checkpoint.uri, old, new, version, sources)
