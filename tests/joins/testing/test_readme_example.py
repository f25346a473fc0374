"""The determinism kit guide's example (docs/testing.md), run as written: a user's enrichment pipeline
with a filter and an aggregation, checked end to end in Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamjoin.testing import assert_deterministic

pytestmark = pytest.mark.spark

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def at(seconds: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def purchases_per_plan(activity, profiles, *, joins, checkpoint):
    enriched = joins.stream_table_join(
        activity.where(F.col("action") != "end"), profiles, "user_id", stream_time="ts",
        table_key="user_id", table_time="changed_at", delay=dt.timedelta(0), checkpoint=f"{checkpoint}/enrich")
    return (enriched.where(F.col("action") == "buy")
            .groupBy("plan").agg(F.count("*").alias("purchases")))


def test_readme_example_enrichment_with_a_filter_and_an_aggregation_is_deterministic(streamjoin_spark):
    utc = pa.timestamp("us", "UTC")
    activity = pa.table({"user_id": [1, 2, 1, 3], "ts": pa.array([at(1), at(4), at(12), at(14)], utc),
                         "action": ["buy", "view", "buy", "buy"]})
    profiles = pa.table({"user_id": [1, 2, 1], "op": ["upsert", "upsert", "upsert"],
                         "changed_at": pa.array([at(0), at(3), at(10)], utc), "plan": ["free", "pro", "pro"]})
    end = [None, pa.table({"user_id": [None], "op": ["heartbeat"], "changed_at": pa.array([at(1000)], utc),
                           "plan": [None]}, schema=profiles.schema)]
    report = assert_deterministic(purchases_per_plan, {"activity": activity, "profiles": profiles},
                                  mode="spark", spark=streamjoin_spark, end=end, max_examples=2)
    assert report.examples == 2
