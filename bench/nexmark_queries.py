"""The Nexmark queries of ``streamjoin bench nexmark``, each as streamjoin's join and as the
nearest Spark equivalent over the same files, with the number of rows both must output.

* **q3** (table-table): persons in OR, ID or CA joined with their auctions in category 10, as both
  tables grow: :func:`streamjoin.table_table_join` (auctions declared with an immutable join key,
  as Nexmark's auctions never change seller: one stage) beside Spark's stream-stream inner join
  with no watermark (its state, like the view's, keeps every row);
* **q20** (stream-table, as of): each bid enriched with its auction, category 10:
  :func:`streamjoin.stream_table_join` (``mode="as_of"``) beside Spark's stream-stream join bounded
  by the auction's life (``a.date_time <= b.date_time <= a.expires``, watermarks on both);
* **q8w** (interval, in the spirit of q8): new persons and the auctions they open within
  ``WINDOW_S`` seconds of joining: :func:`streamjoin.interval_join` beside Spark's stream-stream
  join with the same time range and watermarks.
"""

from __future__ import annotations

import datetime
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from streamjoin.bench.harness import store_spec
from streamjoin.bench.nexmark_data import DDL, MAX_AUCTION_US, Nexmark

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["Query", "QUERIES", "Scratch", "WINDOW_S", "DELAY_S"]

WINDOW_S = 2                      # q8w: auctions opened within 2 s of their seller joining
DELAY_S = 2                       # watermark delay of every watermarked join (events arrive in order)
LOCAL_STATES = ("OR", "ID", "CA")
CATEGORY = 10


@dataclass(frozen=True)
class Scratch:
    """Where one run reads its inputs and keeps its checkpoint and local state."""

    inputs: str
    run: str
    store: str
    partitions: int
    fused: bool = True                                       # table_table_join(fuse_key_stages=...)
    declared: bool = False                                   # q3: auctions declared with an immutable join key

    def join_options(self) -> dict[str, Any]:
        """The joins' options: the store's kind and options (``store_spec``), checkpoint, partitions, state."""
        kind, options = store_spec(self.store)
        return {"store": kind, "store_options": options, "checkpoint": os.path.join(self.run, "join"),
                "partitions": self.partitions, "state_dir": os.path.join(self.run, "state")}


def source(spark: SparkSession, scratch: Scratch, name: str) -> DataFrame:
    """The file stream ``name``, one micro-batch a file."""
    return (spark.readStream.schema(DDL[name.split("-")[0]]).option("maxFilesPerTrigger", 1)
            .parquet(os.path.join(scratch.inputs, name)))


@dataclass(frozen=True)
class Query:
    """One query: its join, streamjoin's and Spark's plans, and the rows both must output."""

    name: str
    join: str
    reads: tuple[str, ...]                                   # the streams it reads
    ours: Callable[[SparkSession, Scratch], DataFrame]
    spark: Callable[[SparkSession, Scratch], DataFrame]
    expected: Callable[[Nexmark], int]
    flink_per_core: float                                    # the published figure, events/s per core
    fusable: bool = False                                    # a table join with a side keyed by its join key

    def input_rows(self, data: Nexmark) -> int:
        return sum(getattr(data, name).num_rows for name in self.reads)


def _local_persons(spark: SparkSession, scratch: Scratch) -> DataFrame:
    return source(spark, scratch, "persons").where(f"state IN {LOCAL_STATES}")


def _q3_ours(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from streamjoin import table_table_join

    auctions = source(spark, scratch, "auctions").where(f"category = {CATEGORY}")
    # an auction never changes seller (Nexmark's auctions are events): declared, its changes need
    # no stage of their own either (right_immutable_join_key)
    return table_table_join(_local_persons(spark, scratch), auctions, (["id"], ["seller"]), left_key="id",
                            right_key="id", left_time="date_time", right_time="date_time",
                            fuse_key_stages=scratch.fused, right_immutable_join_key=scratch.declared,
                            **scratch.join_options())


def _q3_spark(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from pyspark.sql import functions as F

    persons = _local_persons(spark, scratch).alias("p")
    auctions = source(spark, scratch, "auctions").where(f"category = {CATEGORY}").alias("a")
    return persons.join(auctions, F.col("p.id") == F.col("a.seller"))


def _q3_expected(data: Nexmark) -> int:
    state = data.persons.column("state").to_numpy(zero_copy_only=False)
    seller = data.auctions.column("seller").to_numpy()
    category = data.auctions.column("category").to_numpy()
    return int(((category == CATEGORY) & np.isin(state[seller], LOCAL_STATES)).sum())


def _q20_ours(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from streamjoin import stream_table_join

    auctions = source(spark, scratch, "auctions-flush").where(f"category = {CATEGORY} OR op = 'heartbeat'")
    return stream_table_join(source(spark, scratch, "bids"), auctions, "auction", stream_time="date_time",
                             table_key="id", table_time="date_time", how="inner", mode="as_of",
                             delay=datetime.timedelta(seconds=DELAY_S), **scratch.join_options())


def _q20_spark(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from pyspark.sql import functions as F

    bids = source(spark, scratch, "bids").withWatermark("date_time", f"{DELAY_S} seconds").alias("b")
    auctions = (source(spark, scratch, "auctions").where(f"category = {CATEGORY}")
                .withWatermark("date_time", f"{DELAY_S} seconds").alias("a"))
    life = f"{MAX_AUCTION_US // 1_000_000} seconds"
    return bids.join(auctions, (F.col("b.auction") == F.col("a.id"))
                     & (F.col("b.date_time") >= F.col("a.date_time"))
                     & (F.col("b.date_time") <= F.col("a.date_time") + F.expr(f"INTERVAL {life}"))
                     & (F.col("b.date_time") <= F.col("a.expires")))


def _q20_expected(data: Nexmark) -> int:
    category = data.auctions.column("category").to_numpy()
    return int((category[data.bids.column("auction").to_numpy()] == CATEGORY).sum())


def _q8_ours(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from streamjoin import interval_join

    return interval_join(source(spark, scratch, "persons"), source(spark, scratch, "auctions"), (["id"], ["seller"]),
                         left_time="date_time", right_time="date_time", lower=datetime.timedelta(0),
                         upper=datetime.timedelta(seconds=WINDOW_S), delay=datetime.timedelta(seconds=DELAY_S),
                         how="inner", **scratch.join_options())


def _q8_spark(spark: SparkSession, scratch: Scratch) -> DataFrame:
    from pyspark.sql import functions as F

    persons = source(spark, scratch, "persons").withWatermark("date_time", f"{DELAY_S} seconds").alias("p")
    auctions = source(spark, scratch, "auctions").withWatermark("date_time", f"{DELAY_S} seconds").alias("a")
    return persons.join(auctions, (F.col("p.id") == F.col("a.seller"))
                        & (F.col("a.date_time") >= F.col("p.date_time"))
                        & (F.col("a.date_time") <= F.col("p.date_time") + F.expr(f"INTERVAL {WINDOW_S} seconds")))


def _q8_expected(data: Nexmark) -> int:
    joined = data.persons.column("date_time").cast("int64").to_numpy()
    opened = data.auctions.column("date_time").cast("int64").to_numpy()
    seller = data.auctions.column("seller").to_numpy()
    return int((opened - joined[seller] <= WINDOW_S * 1_000_000).sum())


#: Flink 1.13's figures from the Nexmark project's published results (Throughput/Cores column):
#: q3 152.12 K/s, q8 146.14 K/s, q20 18.98 K/s per core.
QUERIES: dict[str, Query] = {
    "q3": Query("q3", "table-table", ("persons", "auctions"), _q3_ours, _q3_spark, _q3_expected, 152_120.0,
                fusable=True),
    "q20": Query("q20", "stream-table as-of", ("bids", "auctions"), _q20_ours, _q20_spark, _q20_expected, 18_980.0),
    "q8w": Query("q8w", "interval", ("persons", "auctions"), _q8_ours, _q8_spark, _q8_expected, 146_140.0),
}

