"""Reading the join's observed metrics: :func:`streamjoin.progress_metrics` gives the same named,
typed values from every shape Spark hands a progress over in (classic PySpark, Spark Connect, a
listener's rows, a progress as JSON), and refuses an ambiguous or missing join by name."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from pyspark.sql import Row

from streamjoin import progress_metrics
from streamjoin.errors import JoinDefinitionError
from streamjoin.runtime.operator import NEG_INF, POS_INF
from streamjoin.spark.progress import time_of

NAME = "streamjoin interval_join /data/ck"
VALUES = {"input_rows_left": 3, "output_rows": 2, "state_open_seconds_max": 0.25, "partitions": 2,
          "watermark": "2024-01-01 01:29:00.000000+01:00"}
TYPED = {"input_rows_left": 3, "output_rows": 2, "state_open_seconds_max": 0.25, "partitions": 2,
         "watermark": datetime(2024, 1, 1, 0, 29, tzinfo=timezone.utc)}
TYPES = {"input_rows_left": "long", "output_rows": "long", "state_open_seconds_max": "double",
         "partitions": "long", "watermark": "string"}


def _connect(values: dict) -> Row:
    """An observation as Spark Connect hands it over: each struct as its values and schema."""
    inner = {"type": "struct", "fields": [{"name": n, "type": TYPES[n], "nullable": True, "metadata": {}}
                                          for n in values]}
    outer = {"type": "struct", "fields": [{"name": "metrics", "type": inner, "nullable": True, "metadata": {}}]}
    return Row(values=[{"values": list(values.values()), "schema": inner}], schema=outer)


def test_progress_metrics_reads_classic_connect_listener_and_json_progress_alike():
    classic = {"observedMetrics": {NAME: Row(metrics=dict(VALUES))}}
    connect = {"observedMetrics": {NAME: _connect(VALUES)}}
    listener = {"observedMetrics": {NAME: Row(metrics=Row(**VALUES))}}
    as_json = {"observedMetrics": {NAME: {"metrics": dict(VALUES)}}}
    got = [progress_metrics(p) for p in (classic, connect, listener, as_json)]
    assert got == [TYPED] * 4
    assert all(isinstance(g["watermark"], datetime) for g in got)


def test_progress_metrics_takes_a_progress_as_json_text_or_as_a_dict():
    """``progress.json`` as StreamingQueryProgress.fromJson takes it, and its parsed dict."""
    as_dict = {"id": "q", "batchId": 3, "observedMetrics": {NAME: {"metrics": dict(VALUES)}}}
    assert progress_metrics(json.dumps(as_dict)) == progress_metrics(as_dict) == TYPED
    assert progress_metrics(json.dumps(as_dict).encode()) == TYPED
    assert progress_metrics(json.dumps({"id": "q", "observedMetrics": {}})) is None
    with pytest.raises(JoinDefinitionError, match="not a progress in JSON"):
        progress_metrics("{")
    with pytest.raises(JoinDefinitionError, match="is a list, not a progress"):
        progress_metrics("[1]")


def test_progress_metrics_takes_a_query_and_gives_none_where_no_value():
    class Query:
        lastProgress = None

    assert progress_metrics(Query()) is None                       # no progress yet
    assert progress_metrics({"observedMetrics": {}}) is None       # a trigger that ran no batch
    Query.lastProgress = {"observedMetrics": {NAME: Row(metrics=dict(VALUES, watermark=None))}}
    assert progress_metrics(Query()) == dict(TYPED, watermark=None)


def test_progress_metrics_picks_a_join_by_checkpoint_and_refuses_ambiguity():
    other = "streamjoin enrichment_join /data/other"
    progress = {"observedMetrics": {NAME: Row(metrics=dict(VALUES)), other: Row(metrics={"output_rows": 9}),
                                    "unrelated": Row(n=1)}}
    assert progress_metrics(progress, checkpoint="/data/ck") == TYPED
    assert progress_metrics(progress, checkpoint="file:///data/other") == {"output_rows": 9}
    with pytest.raises(JoinDefinitionError, match="pass checkpoint="):
        progress_metrics(progress)
    with pytest.raises(JoinDefinitionError, match="/data/missing"):
        progress_metrics(progress, checkpoint="/data/missing")


def test_progress_metrics_of_a_table_join_are_its_join_stages_by_its_own_checkpoint_or_none():
    # a table-table join reports one metrics entry per stage; the join's own checkpoint (and None,
    # the query's one join) once matched none of them and raised
    join, keys = "streamjoin table_join_fused /data/view/join", "streamjoin table_join_keys /data/view/right_keys"
    progress = {"observedMetrics": {join: Row(metrics={"output_rows": 5}), keys: Row(metrics={"output_rows": 2})}}
    assert progress_metrics(progress) == progress_metrics(progress, checkpoint="/data/view") == {"output_rows": 5}
    assert progress_metrics(progress, checkpoint="/data/view/right_keys") == {"output_rows": 2}


def test_time_of_maps_the_infinities():
    assert time_of(None) is None and time_of(NEG_INF) is None
    assert time_of(POS_INF) == datetime.max.replace(tzinfo=timezone.utc)
    assert time_of(1_704_068_940_000_001) == datetime(2024, 1, 1, 0, 29, tzinfo=timezone.utc) + timedelta(microseconds=1)


@pytest.mark.spark
def test_progress_observed_watermark_text_reads_back_the_instant_in_any_session_time_zone(spark):
    from pyspark.sql import functions as F

    from streamjoin.spark.progress import _TIME_TEXT

    instant = datetime(2024, 7, 1, 0, 29, 0, 5, tzinfo=timezone.utc)
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/New_York")
    try:
        (text,) = spark.range(1).select(F.date_format(F.lit(instant), _TIME_TEXT)).first()
    finally:
        spark.conf.set("spark.sql.session.timeZone", zone)
    assert text == "2024-06-30 20:29:00.000005-04:00"
    assert progress_metrics({"observedMetrics": {NAME: Row(metrics={"watermark": text})}}) == {"watermark": instant}


def test_progress_schema_names_the_store_entry_count_an_estimate():
    # RocksDB's estimate of its keys (14-16 for at most 9 buffered rows) was reported as "state_rows"
    import pyarrow as pa

    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.spark.progress import observed_sql

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC"))])
    join = IntervalJoin(schema, schema, (["k"], ["k"]), left_time="t", right_time="t", lower="0 seconds",
                        upper="1 minute", delay="0 seconds")
    observed = observed_sql(join)   # the observed metrics' fields
    assert "state_entries_estimate" in observed and "state_rows" not in observed


def test_metrics_batch_counts_a_store_rebuilt_or_reopened_once_per_partition():
    """A partition's metrics row says whether its store was rebuilt, or opened from its directory
    instead of kept warm (``state_reopened``): the observation sums them over the partitions."""
    import pyarrow as pa

    from streamjoin.interval.operator import IntervalJoin
    from streamjoin.spark.progress import metrics_batch, progress_schema

    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us", "UTC"))])
    join = IntervalJoin(schema, schema, (["k"], ["k"]), left_time="t", right_time="t", lower="0 seconds",
                        upper="1 minute", delay="0 seconds")

    def counted(**metrics) -> tuple[int, int]:
        row = json.loads(metrics_batch(join, metrics, progress_schema(join)).column(-1)[0].as_py())
        return row["stores_rebuilt"], row["stores_reopened"]

    assert counted(state_open="reused", state_reopened=False) == (0, 0)
    assert counted(state_open="reused", state_reopened=True) == (0, 1)
    assert counted(state_open="rebuilt", state_reopened=False) == (1, 0)
