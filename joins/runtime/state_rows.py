"""A join's state as rows, engine-free: what ``read_state`` runs in each Spark task, and the same
for every partition in this process (:func:`state_rows`: tests, the in-process runner, tools).

A partition's changelog is restored (newest snapshot, then deltas) into an in-memory store, so no
local store is opened and a running query is not disturbed, and decoded with the state view its
operator class declares for the side (:attr:`streamjoin.runtime.operator.Operator.state_views`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np
import pyarrow as pa

from streamjoin.changelog import Changelog, restore
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.binding import migration_needed
from streamjoin.runtime.registry import operator_class
from streamjoin.runtime.rescale import Epoch, changelog_uri, epochs, state_epoch
from streamjoin.runtime.views import HISTORY
from streamjoin.statestore.base import Store
from streamjoin.statestore.memory import scratch_store

__all__ = ["state_schema", "decode", "partition_rows", "state_rows", "StateSource", "state_source"]


def state_schema(definition: Mapping[str, Any], side: str) -> pa.Schema:
    """The columns of ``side``'s state rows of a join with ``definition`` (``_partition`` and
    ``_version`` last)."""
    view = operator_class(definition["kind"]).state_views[side]
    return pa.schema(view.schema(definition) + [pa.field("_partition", pa.int32()), pa.field("_version", pa.int64())])


def decode(store: Store, definition: Mapping[str, Any], side: str, schema: pa.Schema) -> pa.Table:
    """``side``'s state rows in ``store`` (restored), in ``schema`` without the last two columns."""
    view = operator_class(definition["kind"]).state_views[side]
    return view.read(store, definition, pa.schema(list(schema)[:-2]))


def partition_rows(uri: str, definition: Mapping[str, Any], side: str, schema: pa.Schema, epoch: Epoch,
                   partition: int, version: int | None) -> pa.Table | None:
    """Partition ``partition``'s state rows of ``side`` as of ``version`` (None: its newest), in
    ``schema``; None when its changelog is empty."""
    log = Changelog(changelog_uri(Checkpoint(uri), epoch, partition))
    if log.listing().empty:
        return None
    with scratch_store("read-state") as store:
        restored = restore(log, store, version).version
        table = decode(store, definition, side, schema)
    table = table.append_column("_partition", pa.array(np.full(table.num_rows, partition), pa.int32()))
    table = table.append_column("_version", pa.array(np.full(table.num_rows, restored), pa.int64()))
    return table.cast(schema)


@dataclass(frozen=True)
class StateSource:
    """What reading one side of a join checkpoint's state needs (:func:`state_source`)."""

    checkpoint: Checkpoint
    #: the checkpoint's partitionings, and the one holding the state (after a repartition or a
    #: migration, the old one until the query's next run rebuilds it)
    epochs: list[Epoch]
    epoch: Epoch
    #: the newest definition, with the definitions the inputs' columns had before it (``HISTORY``)
    definition: dict[str, Any]
    side: str
    schema: pa.Schema


def state_source(checkpoint: str, side: str | None, prefix: str = "", named: str | None = None) -> StateSource:
    """Resolve ``side`` (None: the kind's only one) of the join checkpoint ``checkpoint`` (one
    stage); :class:`JoinDefinitionError` (its message after ``prefix``, the checkpoint called
    ``named``, default ``checkpoint``) when it is not a join checkpoint or has no such side, the
    migration error for a checkpoint of format 1."""
    cp = Checkpoint(checkpoint)
    named = checkpoint if named is None else named
    binding = cp.binding.root()
    if binding is None:
        from streamjoin.runtime.plan import recorded_stages

        stages = recorded_stages(cp.files)
        if stages:   # a table-table join's: its stages are the joins whose state there is
            root = cp.uri.rstrip("/")
            raise JoinDefinitionError(
                f"{prefix}{named} is the checkpoint of a join of several stages, each with its own state: "
                f"read one stage's, one of {', '.join(repr(f'{root}/{stage}') for stage in stages)}")
        raise JoinDefinitionError(f"{prefix}{named} is not a join checkpoint (it has no streamjoin.json)")
    if binding.get("format") == 1:
        raise migration_needed(cp.uri)
    found = epochs(cp, binding)
    history = cp.binding.history(binding)
    definition = history[-1]
    kind = definition.get("kind")
    sides = tuple(operator_class(kind).state_views)
    side = sides[0] if side is None and len(sides) == 1 else side
    if side not in sides:
        raise JoinDefinitionError(f"{prefix}{named} holds the state of a {kind}, whose sides are "
                                  f"{list(sides)}; side={side!r} is not one of them")
    full = {**definition, HISTORY: history} if len(history) > 1 else dict(definition)
    return StateSource(cp, found, state_epoch(cp, found), full, side, state_schema(definition, side))


def state_rows(checkpoint: str, side: str | None = None, version: int | None = None) -> pa.Table:
    """Every partition's state rows of ``side`` (None: the kind's only side) of one join
    checkpoint (a table-table join's stage), as ``read_state`` returns them, in this process."""
    src = state_source(checkpoint, side)
    parts = [partition_rows(src.checkpoint.uri, src.definition, src.side, src.schema, src.epoch, p, version)
             for p in range(src.epoch.partitions)]
    found_parts = [p for p in parts if p is not None]
    return pa.concat_tables(found_parts) if found_parts else src.schema.empty_table()
