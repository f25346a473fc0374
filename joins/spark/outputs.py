"""Reading what a join set aside (late rows, dead letters) and its metrics, as DataFrames.

Set-aside rows are stored as ``set_aside/<input>/v=<version>/p=<partition>.parquet`` under a
checkpoint. They are read back without Spark's partition discovery, so a row's own columns (even
ones named ``v`` or ``p``) come back exactly as they were; the version and partition are added from
the file path as ``VERSION_COLUMN`` and ``PARTITION_COLUMN``. Should the rows already have
a column of that name, the added column gets one more leading underscore until its name is free
(``_version`` -> ``__version``): nothing of the row is replaced.
"""

from __future__ import annotations

import json
import posixpath
from datetime import datetime
from typing import Any

import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_schema

from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import stage_checkpoints
from streamjoin.runtime.registry import operator_class
from streamjoin.spark.progress import is_time_field, time_of

__all__ = ["set_aside_rows", "join_metrics", "VERSION_COLUMN", "PARTITION_COLUMN"]

#: Columns added to set-aside rows: the version (micro-batch id) and partition they arrived in.
VERSION_COLUMN, PARTITION_COLUMN = "_version", "_partition"


_BINDING = "streamjoin.json"
_FILE = r"/v=(-?\d+)/p=(\d+)\.parquet$"


def set_aside_rows(spark: SparkSession, checkpoint: str, input_name: str) -> DataFrame:
    """Rows of input ``input_name`` the join did not process, as they arrived, with a ``_reason``
    column and the version and partition they arrived in (see the module on those columns' names).

    A checkpoint with no rows set aside for a valid input gives an empty DataFrame of the same
    columns (the join records them when it is defined; for a checkpoint from an older streamjoin or
    the ``*_source`` inputs, just ``_reason``, ``_version`` and ``_partition``).

    Args:
        spark: The session to read with.
        checkpoint: The join's checkpoint (a table-table join's stage: ``<checkpoint>/left_keys``,
            ``right_keys`` or ``join``).
        input_name: ``left`` / ``right`` for interval joins; ``stream``, ``table``,
            ``table_source`` for ``stream_table_join``; for ``table_table_join``, ``changes`` /
            ``changes_source`` under ``<checkpoint>/left_keys`` and ``right_keys``, ``left`` /
            ``right`` under ``<checkpoint>/join``.

    Returns:
        The rows set aside, in the input's columns, then ``_reason``, the version and the partition.

    Raises:
        JoinDefinitionError: ``checkpoint`` is not a join checkpoint, or ``input_name`` is not one
            of its inputs (both named in the message).
        CheckpointDamagedError: ``streamjoin.json`` or a set-aside file of the input cannot be read
            (named; each set-aside file's Parquet footer is read here, on the driver).
    """
    cp, kind = _checkpoint(checkpoint, "set_aside_rows")
    folder = posixpath.join(cp.root, "set_aside")
    present = sorted(info.base_name for info in cp.fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
                     if info.type == pafs.FileType.Directory)
    valid = list(dict.fromkeys([*operator_class(kind).set_aside_inputs, *present]))
    if input_name not in valid:
        raise JoinDefinitionError(
            f"set_aside_rows: {checkpoint} is a checkpoint of a {kind}, which has no input {input_name!r}; "
            f"its inputs are {valid}"
        )
    uri = cp.set_aside.uri(input_name) if input_name in present else None
    if uri is None:
        return spark.createDataFrame([], f"_reason string, {VERSION_COLUMN} long, {PARTITION_COLUMN} long")
    for found in cp.set_aside.files_under(input_name):   # a damaged file named here, not in a task's trace
        cp.set_aside.check(found)
    reader = spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", "*.parquet")
    if cp.binding.evolved():   # files of several schemas of the input: read all in the newest
        reader = reader.schema(from_arrow_schema(cp.set_aside.read_schema(input_name)))
    rows = reader.parquet(uri)
    path = F.input_file_name()
    version, partition = _free(VERSION_COLUMN, rows.columns), _free(PARTITION_COLUMN, rows.columns)
    return rows.select(
        "*",
        F.regexp_extract(path, _FILE, 1).cast("long").alias(version),
        F.regexp_extract(path, _FILE, 2).cast("long").alias(partition),
    )


def join_metrics(spark: SparkSession, checkpoint: str) -> DataFrame:
    """One row per version and partition: rows in, out and set aside, state size, restores.

    Counts are longs, ``state_open_seconds`` a double in seconds, event times (``watermark``,
    ``event_watermark``, ``table_watermark``, ``max_time_<input>``) timestamps, null where there is
    none yet (a batch run's final watermark is 9999-12-31 23:59:59.999999).

    Args:
        spark: The session to read with.
        checkpoint: The join's checkpoint (a table-table join's stage).

    Returns:
        The records of the versions the checkpoint keeps (no rows before the first version).

    Raises:
        JoinDefinitionError: ``checkpoint`` is not a join checkpoint.
        CheckpointDamagedError: ``streamjoin.json`` or a commit record cannot be read (named).
    """
    cp, kind = _checkpoint(checkpoint, "join_metrics")
    operator = operator_class(kind)
    records = [{k: time_of(v) if is_time_field(k, operator) else v for k, v in r.items()} for r in cp.commits.read_metrics()]
    if not records:
        return spark.createDataFrame([], "version long, partition long")
    names = list(dict.fromkeys(k for r in records for k in r))
    schema = T.StructType([T.StructField(n, _spark_type([r.get(n) for r in records], is_time_field(n, operator))) for n in names])
    text = {f.name for f in schema.fields if isinstance(f.dataType, T.StringType)}
    rows = [tuple(json.dumps(r.get(n)) if n in text and not isinstance(r.get(n), (str, type(None))) else r.get(n)
                  for n in names) for r in records]
    return spark.createDataFrame(rows, schema)


def _spark_type(values: list[Any], time: bool) -> T.DataType:
    """The column type of a metric from its values (a metrics record is JSON); ``time``: an event time."""
    found = {type(v) for v in values if v is not None}
    if time or found == {datetime}:
        return T.TimestampType()
    if found == {bool}:
        return T.BooleanType()
    if found and found <= {int}:
        return T.LongType()
    if found and found <= {int, float}:
        return T.DoubleType()
    return T.LongType() if not found else T.StringType()   # anything else as its JSON text


def _checkpoint(checkpoint: str, caller: str) -> tuple[Checkpoint, str]:
    """The checkpoint at ``checkpoint`` and its operator kind; refuse a path that is not one."""
    cp = Checkpoint(checkpoint)
    if cp.fs.get_file_info(posixpath.join(cp.root, _BINDING)).type != pafs.FileType.File:
        try:
            stages = stage_checkpoints(checkpoint)
        except JoinDefinitionError:
            stages = []
        hint = (f"; it is the checkpoint of a join of several stages (a table_table_join's): pass one of "
                f"its stages, {stages}") if stages else "; pass the checkpoint= location the join was started with"
        raise JoinDefinitionError(f"{caller}: {checkpoint} is not a join checkpoint (it has no {_BINDING}){hint}")
    root = cp.binding.root() or {}   # CheckpointDamagedError naming the file if it is not a JSON object
    return cp, str(root.get("definition", {}).get("kind", "join"))


def _free(name: str, taken: list[str]) -> str:
    """``name``, with leading underscores added until no column in ``taken`` has it."""
    while name in taken:
        name = "_" + name
    return name
