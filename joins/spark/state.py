"""A join's state as a DataFrame, decoded from its changelog: for debugging and audits.

``read_state(spark, checkpoint, version=None, side=...)`` runs one Spark task per partition. Each
task restores its partition's changelog (newest snapshot, then deltas, through
``streamjoin.changelog.restore``) into an in-memory map, so no local store is opened and a
running query is not disturbed, and decodes it with the state view its operator class declares
for ``side`` (``state_views``, ``streamjoin.runtime.views``; the class comes from the
checkpoint's definition through ``streamjoin.runtime.registry``). The sides:

===================  =========================================================================
kind / ``side``      rows
===================  =========================================================================
interval_join        ``left`` / ``right``: the buffered rows of that side (its stored columns,
                     with their event time), ``_matched`` (null on a side whose matches the
                     join does not record: only outer, semi and anti sides) and ``_watermark`` (the partition's watermark after the version)
enrichment_join      ``table``: every table version held (key columns, ``_op``, ``_change_time``,
                     ``_sequence``, value columns); ``events``: the events waiting (as-of mode)
table_join_keys      ``keys``: per primary key, the last change applied (``_change_time``,
                     ``_sequence``, ``_has_row``) and the row's join key (JSON arrays)
table_join           ``left`` / ``right``: each table's current rows by (join key, primary key),
                     as JSON arrays of the stored values
table_join_fused     ``left`` / ``right`` as ``table_join``'s; ``left_keys`` / ``right_keys``: a
                     side's ``keys`` as ``table_join_keys``' when its first stage runs inside
                     (``fuse_key_stages=True``; empty for a side that keeps its own stage)
===================  =========================================================================

Every row also has ``_partition`` and ``_version`` (the version restored). A table_table_join's
checkpoint holds three stages: pass ``<checkpoint>/left_keys``, ``right_keys`` or ``join``
(fused, the stages it has; with both sides fused, the checkpoint itself).
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.changelog import Changelog
from streamjoin.errors import CheckpointDamagedError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import stage_checkpoints
from streamjoin.runtime.registry import operator_class
from streamjoin.runtime.rescale import Epoch, changelog_uri, epoch_has_run, epochs
from streamjoin.runtime.state_rows import partition_rows, state_schema, state_source

__all__ = ["read_state", "read_join_state", "state_schema"]


def read_state(spark: SparkSession, checkpoint: str, version: int | None = None, side: str | None = None) -> DataFrame:
    """The state of one side of a join checkpoint as rows, one task per partition.

    Args:
        spark: The session to read with.
        checkpoint: The join's checkpoint (a table-table join's stage).
        version: The version to read as of (None: each partition's newest).
        side: One of the join kind's sides (see the module's table); None when it has one.

    Returns:
        The side's state rows.

    Raises:
        JoinDefinitionError: ``checkpoint`` is not a join checkpoint, or ``side`` is not one of its
            kind's sides (both named in the message).
        CheckpointDamagedError: a partition's changelog is missing or empty although the
            checkpoint has committed versions (the partition and its path named; checked on the
            driver, and again by each task).
    """
    stages = stage_checkpoints(checkpoint)
    if len(stages) != 1:
        raise JoinDefinitionError(f"read_state: {checkpoint} is a table_table_join's checkpoint: pass one of "
                                  f"its stages, {stages}")
    src = state_source(stages[0], side, prefix="read_state: ", named=checkpoint)
    _check_changelogs(src.checkpoint, src.epochs, src.epoch)
    reader = _StateReader(src.checkpoint.uri, src.definition, src.side, version, src.schema, src.epoch)
    partitions = src.epoch.partitions
    ids = spark.range(0, partitions, 1, max(partitions, 1))
    return ids.mapInArrow(reader, from_arrow_schema(src.schema, prefer_timestamp_ntz=True))


def read_join_state(spark: SparkSession, checkpoint: str, version: int | None = None) -> dict[str, DataFrame]:
    """Every side of a join's state, by the names the joins' ``initial_state=`` takes: what starts
    a new checkpoint from this one's state (docs/operations/upgrades.md, "Starting from state").

    Args:
        spark: The session to read with.
        checkpoint: The join's checkpoint (a table-table join's: the folder of its stages).
        version: As `read_state`'s.

    Returns:
        `read_state` of each side: an interval join's ``left`` and ``right``, a stream-table
        join's ``table`` and ``events``, a table-table join's ``left`` and ``right`` (its join
        stage's) and ``left_keys`` and ``right_keys`` (each side's key stage's ``keys``, or a
        fused stage's side of that name).
    """
    stages = stage_checkpoints(checkpoint)
    root = Checkpoint(checkpoint).uri.rstrip("/")
    names = {uri: uri[len(root):].lstrip("/") for uri in stages}
    out: dict[str, DataFrame] = {}
    for uri in stages:
        kind = (Checkpoint(uri).binding.root() or {}).get("definition", {}).get("kind")
        sides = tuple(operator_class(kind).state_views) if kind else ()
        if len(sides) == 1 and len(stages) > 1:   # a stage of one side is named by its stage
            out[names[uri]] = read_state(spark, uri, version, sides[0])
            continue
        for side in sides:
            if side in names.values() and side != names[uri]:
                continue   # a fused stage's keys of a side that has a stage of its own
            out[side] = read_state(spark, uri, version, side)
    return out


def _check_changelogs(cp: Checkpoint, found: list[Epoch], epoch: Epoch) -> None:
    """Raise :class:`CheckpointDamagedError` naming the first partition of ``epoch`` whose
    changelog is missing or empty although that partitioning has committed versions: its rows
    would be left out of the state read, not reported (one listing per partition)."""
    if not found or not epoch_has_run(cp, found, epoch.number):
        return
    for partition in range(epoch.partitions):
        uri = changelog_uri(cp, epoch, partition)
        if Changelog(uri).listing().empty:
            raise _lost(cp, partition, uri)


def _lost(cp: Checkpoint, partition: int, uri: str) -> CheckpointDamagedError:
    return CheckpointDamagedError(
        f"read_state: partition {partition}'s changelog {uri} is missing or empty, but checkpoint {cp.uri} has "
        "committed versions, so that partition's state cannot be read (the other partitions' alone would be "
        "a part taken for the whole). Restore the directory from a copy of the checkpoint; "
        "`streamjoin checkpoint verify` lists what else is missing", path=uri)


class _StateReader:
    """The task: restore partition ``p``'s changelog in memory and decode ``side``."""

    def __init__(self, uri: str, definition: dict[str, Any], side: str, version: int | None, schema: pa.Schema,
                 epoch: Epoch):
        self.uri, self.definition, self.side, self.version, self.schema = uri, definition, side, version, schema
        self.epoch = epoch

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for partition in batch.column(0).to_pylist():
                yield from self._partition(int(partition))

    def _partition(self, partition: int) -> Iterator[pa.RecordBatch]:
        checkpoint = Checkpoint(self.uri)
        epoch = self.epoch
        table = partition_rows(self.uri, self.definition, self.side, self.schema, epoch, partition, self.version)
        if table is None:
            log = Changelog(changelog_uri(checkpoint, epoch, partition))
            if checkpoint.commits.newest_version() is not None and epoch_has_run(checkpoint, epochs(checkpoint), epoch.number):
                raise _lost(checkpoint, partition, log.uri)   # (removed since the driver looked)
            return
        yield from table.to_batches()
