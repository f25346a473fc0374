"""The stream-table join end to end through Spark: a streaming as-of join with a
bootstrap snapshot, a change that arrives after an event it precedes, a delete and a dead letter;
Debezium JSON envelopes through the pre-stage; a business change time with a table TTL; and
argument errors before any query starts."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin import join_metrics, set_aside_rows, stream_table_join
from streamjoin.changes import ChangeFormat
from streamjoin.errors import JoinDefinitionError

pytestmark = pytest.mark.spark

BASE = 1_767_225_600  # 2026-01-01T00:00:00Z, seconds
EVENTS = "user_id bigint, ts timestamp, action string"
CHANGES = "user_id bigint, op string, changed_at timestamp, plan string, country string"
PROFILES = [(1, "free", "DE"), (2, "free", "FR"), (3, "pro", "US")]


def _at(seconds: int):
    import datetime as dt

    return dt.datetime.fromtimestamp(BASE + seconds, dt.timezone.utc)


def _files(directory: str, batches: list[list[dict]], schema: pa.Schema) -> None:
    """One Parquet file per micro-batch, with increasing modification times (the read order)."""
    os.makedirs(directory, exist_ok=True)
    for i, rows in enumerate(batches):
        path = os.path.join(directory, f"part-{i:03d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema), path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


EVENT_SCHEMA = pa.schema([("user_id", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("action", pa.string())])
CHANGE_SCHEMA = pa.schema([("user_id", pa.int64()), ("op", pa.string()), ("changed_at", pa.timestamp("us", "UTC")),
                           ("plan", pa.string()), ("country", pa.string())])


def _event(user, seconds, action):
    return {"user_id": user, "ts": _at(seconds), "action": action}


def _change(user, op, seconds, plan=None, country=None):
    return {"user_id": user, "op": op, "changed_at": _at(seconds), "plan": plan, "country": country}


@pytest.mark.parametrize("layout", ["buckets", "runs"])
def test_stream_table_join_as_of_streaming_with_bootstrap(spark, tmp_path, layout):
    root = str(tmp_path)
    _files(f"{root}/events", [
        [_event(1, 10, "a"), _event(2, 12, "b"), _event(4, 14, "c"), _event(2, 25, "b2")],
        [_event(3, 28, "d"), _event(3, 33, "e"), _event(1, 19, "f")],
        [_event(1, 100, "sentinel")],
        [_event(1, 200, "sentinel")],
    ], EVENT_SCHEMA)
    _files(f"{root}/changes", [
        [_change(1, "upsert", 20, "pro", "DE")],
        [_change(2, "update", 22, "free", "DE"), _change(3, "merge", 24), _change(3, "delete", 30)],
        [_change(None, "heartbeat", 100)],
        [_change(None, "heartbeat", 200)],
    ], CHANGE_SCHEMA)
    events = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).parquet(f"{root}/events")
    changes = spark.readStream.schema(CHANGES).option("maxFilesPerTrigger", 1).parquet(f"{root}/changes")
    bootstrap = spark.createDataFrame(PROFILES, "user_id bigint, plan string, country string")
    context = spark.sparkContext
    context.setJobGroup("bootstrap-test", "the defining thread's group")
    try:
        joined = stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                                   table_time="changed_at", delay=timedelta(seconds=10), bootstrap=bootstrap,
                                   checkpoint=f"{root}/ck", partitions=3, layout=layout)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    # the bootstrap is written in a thread of its own, whose jobs inherit the defining thread's group
    from streamjoin.spark import initial_writer

    initial_writer.wait_for(f"{root}/ck")
    assert context.statusTracker().getJobIdsForGroup("bootstrap-test")
    query = (joined.writeStream.format("parquet").option("path", f"{root}/out")
             .option("checkpointLocation", f"{root}/spark").trigger(availableNow=True).start())
    query.awaitTermination()
    got = sorted(tuple(r) for r in spark.read.parquet(f"{root}/out").select("action", "plan", "country").collect())
    # the sentinel at 100 s comes out in the run's trailing no-data micro-batch (the heartbeat at
    # 200 s moved the table watermark past it); the one at 200 s waits for a later heartbeat
    assert got == [("a", "free", "DE"), ("b", "free", "FR"), ("b2", "free", "DE"), ("c", None, None),
                   ("d", "pro", "US"), ("e", None, None), ("f", "free", "DE"), ("sentinel", "pro", "DE")]
    aside = set_aside_rows(spark, f"{root}/ck", "table")
    assert [(r.user_id, r._reason) for r in aside.collect()] == [(3, "unknown op")]
    metrics = join_metrics(spark, f"{root}/ck").collect()
    assert sum(r.asDict().get("initial_rows_table") or 0 for r in metrics) == 3


def test_stream_table_join_bootstrap_that_fails_stops_the_query_before_its_first_task(spark, tmp_path):
    # the bootstrap is written while the query starts (streamjoin.spark.initial_writer): the
    # definition returns at once, and a row that cannot be written stops the first micro-batch
    from pyspark.sql import functions as F

    from streamjoin.errors import InitialRowsError

    root = str(tmp_path)
    _files(f"{root}/events", [[_event(1, 10, "a")]], EVENT_SCHEMA)
    _files(f"{root}/changes", [[_change(1, "upsert", 20, "pro", "DE")]], CHANGE_SCHEMA)
    events = spark.readStream.schema(EVENTS).option("maxFilesPerTrigger", 1).parquet(f"{root}/events")
    changes = spark.readStream.schema(CHANGES).option("maxFilesPerTrigger", 1).parquet(f"{root}/changes")
    bootstrap = spark.createDataFrame(PROFILES, "user_id bigint, plan string, country string").withColumn(
        "plan", F.when(F.col("user_id") == 2, F.raise_error(F.lit("snapshot row 2 is damaged"))).otherwise(F.col("plan")))
    joined = stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                               table_time="changed_at", delay=timedelta(seconds=10), bootstrap=bootstrap,
                               checkpoint=f"{root}/ck", partitions=2)
    query = (joined.writeStream.format("noop").option("checkpointLocation", f"{root}/spark")
             .trigger(availableNow=True).start())
    with pytest.raises(InitialRowsError, match=r"could not be written: .*snapshot row 2 is damaged") as raised:
        query.awaitTermination()
    assert "Fix them and define the join again" in str(raised.value)
    assert isinstance(query.exception(), InitialRowsError)
    assert not os.path.exists(f"{root}/ck/state")   # no task ran


def test_stream_table_join_debezium_json_batch(spark, tmp_path):
    root = str(tmp_path)
    envelopes = [
        {"op": "r", "after": {"user_id": 1, "plan": "free"}, "ts_ms": 1_000},
        {"payload": {"op": "u", "before": {"user_id": 1, "plan": "free"}, "after": {"user_id": 1, "plan": "pro"},
                     "ts_ms": 5_000}},
        {"op": "d", "before": {"user_id": 1, "plan": "pro"}, "ts_ms": 9_000},
    ]
    os.makedirs(f"{root}/cdc")
    with open(f"{root}/cdc/part-0.json", "w") as fh:
        fh.write("\n".join([json.dumps(e) for e in envelopes] + ["{not json"]) + "\n")
    raw = spark.read.text(f"{root}/cdc")
    row = pa.schema([("user_id", pa.int64()), ("plan", pa.string())])
    events = spark.createDataFrame([(1, _at(0).replace(year=1970, month=1, day=1, hour=0, minute=0, second=s), str(s))
                                    for s in (0, 1, 4, 5, 8, 9)], EVENTS)
    joined = stream_table_join(events, raw, "user_id", stream_time="ts", table_key="user_id",
                               table_format=ChangeFormat.debezium_json("user_id", row), delay=timedelta(0),
                               checkpoint=f"{root}/ck", partitions=2)
    got = sorted((r.action, r.plan) for r in joined.collect())
    assert got == [("0", None), ("1", "free"), ("4", "free"), ("5", "pro"), ("8", "pro"), ("9", None)]
    aside = set_aside_rows(spark, f"{root}/ck", "table_source").collect()
    assert [r._reason for r in aside] == ["invalid json"]
    metrics = join_metrics(spark, f"{root}/ck").collect()
    assert sum(r["set_aside_rows_table_source"] or 0 for r in metrics) == 1


def test_stream_table_join_counts_changes_set_aside_before_routing(spark, tmp_path):
    """A change the postgres_changes source cannot decode (op ``undecodable``, e.g. a BC date) and
    an envelope that is no JSON are set aside before routing, and counted: in ``join_metrics``
    and in the query's observed metrics, as the join's own set-aside rows are."""
    from streamjoin import progress_metrics

    root = str(tmp_path)
    envelopes = [{"op": "c", "after": {"user_id": 1, "plan": "free"}, "ts_ms": 1_000},
                 {"op": "undecodable", "ts_ms": 2_000, "error": "column d: '0044-03-15 BC' does not fit date32[day]"}]
    os.makedirs(f"{root}/cdc")
    with open(f"{root}/cdc/part-0.json", "w") as fh:
        fh.write("\n".join([json.dumps(e) for e in envelopes] + ["{not json"]) + "\n")
    os.makedirs(f"{root}/events")
    with open(f"{root}/events/part-0.json", "w") as fh:
        fh.write("\n".join(json.dumps({"user_id": 1, "ts": f"1970-01-01T00:00:0{s}Z", "action": str(s)})
                           for s in (3, 4)) + "\n")
    row = pa.schema([("user_id", pa.int64()), ("plan", pa.string())])
    events = spark.readStream.schema(EVENTS).json(f"{root}/events")
    joined = stream_table_join(events, spark.readStream.text(f"{root}/cdc"), "user_id", stream_time="ts",
                               table_key="user_id", table_format=ChangeFormat.debezium_json("user_id", row),
                               delay=timedelta(0), checkpoint=f"{root}/ck", partitions=2)
    query = (joined.writeStream.format("noop").trigger(availableNow=True)
             .option("checkpointLocation", f"{root}/spark").start())
    query.awaitTermination()
    observed = [progress_metrics(p) or {} for p in query.recentProgress]
    assert sum(m.get("set_aside_rows_table_source", 0) for m in observed) == 2
    metrics = join_metrics(spark, f"{root}/ck").collect()
    assert sum(r["set_aside_rows_table_source"] or 0 for r in metrics) == 2
    assert sorted(r._reason for r in set_aside_rows(spark, f"{root}/ck", "table_source").collect()) == [
        "invalid json", "unknown op"]


def test_stream_table_join_bad_arguments_fail_before_the_query(spark, tmp_path):
    events = spark.createDataFrame([(1, _at(0), "a")], EVENTS)
    changes = spark.createDataFrame([(1, "upsert", _at(0), "free", "DE")], CHANGES)
    args = dict(stream_time="ts", table_key="user_id", table_time="changed_at", delay=timedelta(0))
    with pytest.raises(JoinDefinitionError, match="no column"):
        stream_table_join(events, changes, "nope", **args)
    with pytest.raises(JoinDefinitionError, match="must be a timestamp"):
        stream_table_join(events, changes.withColumn("changed_at", changes.user_id), "user_id", **args)
    with pytest.raises(JoinDefinitionError, match="cannot tell the vocabulary"):
        stream_table_join(events, changes.drop("op"), "user_id", **args)
    with pytest.raises(JoinDefinitionError, match="mode"):
        stream_table_join(events, changes, "user_id", mode="newest", **args)
    with pytest.raises(JoinDefinitionError, match="bootstrap has columns"):
        stream_table_join(events, changes, "user_id", bootstrap=events, **args)
    with pytest.raises(JoinDefinitionError, match="table_ttl"):
        stream_table_join(events, changes, "user_id", table_ttl="0 seconds", **args)
    profiles = spark.createDataFrame(PROFILES, "user_id bigint, plan string, country string")
    with pytest.raises(JoinDefinitionError, match="with table_ttl, bootstrap rows age"):
        stream_table_join(events, changes, "user_id", bootstrap=profiles, table_ttl="1 day", **args)
    stream = spark.readStream.schema(EVENTS).parquet(str(tmp_path))
    with pytest.raises(JoinDefinitionError, match="checkpoint"):
        stream_table_join(stream, changes, "user_id", **args)


def test_stream_table_join_bootstrap_rows_collect_with_a_null_change_time(spark, tmp_path):
    events = spark.createDataFrame([(1, _at(5), "a"), (2, _at(6), "b")], EVENTS)
    changes = spark.createDataFrame([(2, "upsert", _at(1), "pro", "FR")], CHANGES)
    bootstrap = spark.createDataFrame(PROFILES, "user_id bigint, plan string, country string")
    joined = stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                               table_time="changed_at", delay=timedelta(0), bootstrap=bootstrap,
                               checkpoint=str(tmp_path / "ck"), partitions=2)
    got = sorted((r.action, r.plan, r.changed_at) for r in joined.collect())
    assert got == [("a", "free", None), ("b", "pro", _at(1).replace(tzinfo=None))]


def test_stream_table_join_delta_feed_with_a_business_time(spark, tmp_path):
    feed = spark.createDataFrame(
        [(1, "free", _at(1), "insert", 1, _at(100)), (1, "pro", _at(5), "update_postimage", 2, _at(100))],
        "user_id bigint, plan string, valid_from timestamp, _change_type string, _commit_version bigint, "
        "_commit_timestamp timestamp")
    events = spark.createDataFrame([(1, _at(2), "a"), (1, _at(6), "b"), (1, _at(16), "c")], EVENTS)
    joined = stream_table_join(events, feed, "user_id", stream_time="ts", table_key="user_id",
                               table_time="valid_from", delay=timedelta(0), checkpoint=str(tmp_path / "ck"),
                               table_ttl="10 seconds")
    # c: the version of 5 is older than 16 - 10: expired, null-padded and counted
    assert sorted((r.action, r.plan) for r in joined.collect()) == [("a", "free"), ("b", "pro"), ("c", None)]
    metrics = [r.asDict() for r in join_metrics(spark, str(tmp_path / "ck")).collect()]
    assert sum(m.get("expired_lookups") or 0 for m in metrics) == 1


@pytest.mark.parametrize("snapshot", [
    "user_id bigint, plan string, country string",                      # the table's types: in the JVM
    "user_id bigint, plan string, changed_at timestamp_ntz, country string",   # another time type: in the JVM
    "user_id int, plan string, changed_at timestamp, country string",   # another type: through Arrow
])
def test_stream_table_join_bootstrap_changes_are_the_operators(spark, snapshot):
    from pyspark.sql.pandas.types import from_arrow_schema

    from streamjoin.enrichment.operator import EnrichmentJoin
    from streamjoin.spark.enrichment import _AsChanges, _bootstrap_changes
    from streamjoin.spark.runtime import arrow_schema

    changes = spark.createDataFrame([(2, "upsert", _at(1), "pro", "FR")], CHANGES)
    operator = EnrichmentJoin(arrow_schema(spark.createDataFrame([], EVENTS)), arrow_schema(changes), "user_id",
                              stream_time="ts", changes=ChangeFormat.plain("user_id", time="changed_at"))
    timed = "changed_at" in snapshot
    bootstrap = spark.createDataFrame([(1, "free", _at(3), "DE"), (2, None, None, "FR")] if timed
                                      else [(1, "free", "DE"), (2, None, "FR")], snapshot)
    got = _bootstrap_changes(bootstrap, operator)
    arrow = bootstrap.mapInArrow(_AsChanges(operator, arrow_schema(bootstrap)),    # EnrichmentJoin.bootstrap_changes
                                 from_arrow_schema(operator.spec.table, prefer_timestamp_ntz=True))
    assert [(f.name, f.dataType) for f in got.schema] == [(f.name, f.dataType) for f in arrow.schema]
    assert sorted(map(tuple, got.collect()), key=str) == sorted(map(tuple, arrow.collect()), key=str)


@pytest.mark.parametrize("zone", ["UTC", "America/New_York"])
@pytest.mark.parametrize("snapshot_time, change_time", [
    ("timestamp", "timestamp_ntz"), ("timestamp_ntz", "timestamp"), ("date", "timestamp_ntz"), ("date", "timestamp"),
])
def test_stream_table_join_bootstrap_times_convert_in_the_jvm_keeping_their_instants(
        spark, zone, snapshot_time, change_time):
    # a Parquet snapshot's TIMESTAMP beside change rows' TIMESTAMP_NTZ (or another pair of time
    # types): the snapshot's rows are the operator's own, converted in the JVM (no Python UDF),
    # each time the same microseconds since the epoch (UTC) whatever the session's time zone
    import datetime as dt

    from streamjoin.enrichment.operator import EnrichmentJoin
    from streamjoin.spark.enrichment import _bootstrap_changes
    from streamjoin.spark.runtime import arrow_schema

    events = spark.createDataFrame([], EVENTS)
    changes = spark.createDataFrame([], f"user_id bigint, op string, changed_at {change_time}, plan string, "
                                        "country string")
    operator = EnrichmentJoin(arrow_schema(events), arrow_schema(changes), "user_id", stream_time="ts",
                              changes=ChangeFormat.plain("user_id", time="changed_at"))
    times = {"timestamp": [_at(3), _at(-86_400 * 30_000)],                      # instants (one before 1970)
             "timestamp_ntz": [_at(3).replace(tzinfo=None), dt.datetime(1, 1, 1)],   # wall-clock times, as UTC
             "date": [dt.date(2026, 3, 29), dt.date(1900, 1, 1)]}[snapshot_time]
    kind = {"timestamp": pa.timestamp("us", "UTC"), "timestamp_ntz": pa.timestamp("us"), "date": pa.date32()}
    snapshot = pa.table({"user_id": [1, 2, 3], "plan": ["free", None, "pro"],
                         "changed_at": pa.array([*times, None], kind[snapshot_time]), "country": ["DE", "FR", None]})
    expected = operator.bootstrap_changes(snapshot)   # what the operator makes of the snapshot (UTC)
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        bootstrap = spark.createDataFrame([tuple(r.values()) for r in snapshot.to_pylist()],
                                          f"user_id bigint, plan string, changed_at {snapshot_time}, country string")
        got = _bootstrap_changes(bootstrap, operator)
        assert "MapInArrow" not in got._jdf.queryExecution().optimizedPlan().toString()
        rows = got.toArrow()
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")
    assert rows.cast(expected.schema).sort_by("user_id").equals(expected)
