"""Click and order streams for the interval join's Spark tests: rows as ``(key, seconds after
T0, id)``, one Parquet file per micro-batch, read back one file a trigger in the files' order."""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.parquet as pq

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
CLICKS = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("click", pa.string())])
ORDERS = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC")), ("order", pa.string())])


def write_batch(directory: str, schema: pa.Schema, index: int, rows: list[tuple]) -> None:
    """Micro-batch ``index``'s rows (empty too) as the file the source reads ``index``-th."""
    os.makedirs(directory, exist_ok=True)
    table = pa.Table.from_pylist([dict(zip(schema.names, (k, T0 + dt.timedelta(seconds=s), v)))
                                  for k, s, v in rows], schema)
    path = os.path.join(directory, f"part-{index:03d}.parquet")
    pq.write_table(table, path)
    os.utime(path, (1_700_000_000 + index, 1_700_000_000 + index))


def write_batches(directory: str, schema: pa.Schema, batches: list[list[tuple]]) -> None:
    """One file per micro-batch, in read order."""
    for index, rows in enumerate(batches):
        write_batch(directory, schema, index, rows)


def read_streams(spark, root: str):
    """The clicks and orders under ``root`` (``clicks/``, ``orders/``) as streams, a file a trigger."""
    return tuple(spark.readStream.schema(f"k bigint, t timestamp, {name} string").option("maxFilesPerTrigger", 1)
                 .parquet(f"{root}/{name}s") for name in ("click", "order"))
