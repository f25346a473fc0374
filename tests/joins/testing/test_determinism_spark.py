"""assert_deterministic in Spark mode catches a Python UDF keeping a counter across rows, a
``mode="latest"`` enrichment and a ``first()`` over rows from several partitions, each with a
counterexample. Few, small examples: each costs seconds."""

from __future__ import annotations

import datetime as dt
import itertools

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from streamjoin.testing import NonDeterministicError, assert_deterministic
from tests.joins.testing.pipelines import CHANGE_ROWS, EVENT_ROWS, UTC_US, at

pytestmark = pytest.mark.spark

#: Five purchases of user 1 while on the free plan, and the upgrade long after them.
INPUTS = {"events": pa.table({"user_id": [1] * 5, "ts": pa.array([at(s) for s in range(1, 6)], UTC_US),
                              "action": ["buy"] * 5}),
          "changes": pa.table({"user_id": [1, 1], "op": ["upsert", "upsert"],
                               "changed_at": pa.array([at(0), at(100)], UTC_US), "plan": ["free", "pro"]})}
#: Closes every run: an event and a heartbeat far after every input row (the pipelines drop "end").
END = [pa.table({"user_id": [9], "ts": pa.array([at(1000)], UTC_US), "action": ["end"]}),
       pa.table({"user_id": [None], "op": ["heartbeat"], "changed_at": pa.array([at(1000)], UTC_US), "plan": [None]},
                schema=INPUTS["changes"].schema)]
SMALL = dict(end=END, max_batches=2, partitions=(2,), stores=("memory",))


def enriched(events, changes, joins, checkpoint, mode="as_of"):
    return joins.stream_table_join(events.where(F.col("action") != "end"), changes, "user_id", stream_time="ts",
                                   table_key="user_id", table_time="changed_at", delay=dt.timedelta(0), mode=mode,
                                   checkpoint=f"{checkpoint}/enrich")


_COUNTER = itertools.count()


def _next_number(_):
    return next(_COUNTER)


def numbered(events, changes, *, joins, checkpoint):
    """Broken: a Python UDF numbers rows with a counter kept across rows, batches and queries."""
    number = F.udf(_next_number, "bigint")
    return enriched(events.withColumn("n", number("user_id")), changes, joins, checkpoint)


def latest_plan(events, changes, *, joins, checkpoint):
    """Batch-dependent: each purchase gets the plan known at the end of its micro-batch."""
    return enriched(events, changes, joins, checkpoint, mode="latest")


def test_assert_deterministic_spark_catches_a_python_counter_udf(streamjoin_spark):
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(numbered, INPUTS, mode="spark", spark=streamjoin_spark, max_examples=3,
                             shrink_budget=1, disturb=False, **SMALL)
    message = str(caught.value)
    assert "numbered is not deterministic (spark)" in message and "Counterexample (shrunk):" in message
    difference = message.split("Difference:")[1]
    assert " n" in difference.splitlines()[1] and "batch only" in difference and "stream only" in difference
    assert "n" in caught.value.failure.batch.rows.names


def test_assert_deterministic_spark_reports_latest_mode_with_a_counterexample(streamjoin_spark):
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(latest_plan, INPUTS, mode="spark", spark=streamjoin_spark, max_examples=4,
                             shrink_budget=2, disturb=False, **SMALL)
    message = str(caught.value)
    assert 'stream_table_join(mode="latest") is documented as dependent on micro-batch boundaries' in message
    failure = caught.value.failure
    assert failure.plan.count == 2 and failure.plan.batches[1][-1] == 1  # the upgrade came in a later micro-batch
    assert failure.batch.rows != failure.stream.rows and len(failure.batch.rows) == len(failure.stream.rows)


def first_user_per_plan(events, changes, *, joins, checkpoint):
    """Order-dependent: ``first()`` of the users of a plan, whose rows come from several partitions."""
    return enriched(events, changes, joins, checkpoint).groupBy("plan").agg(F.first("user_id").alias("first_user"))


def test_assert_deterministic_spark_catches_first_over_rows_of_several_partitions(streamjoin_spark):
    # users 2 and 3 both end up without a plan; the batch run (two partitions) and a stream in one
    # partition meet them in different orders
    end = [END[0], END[1].cast(CHANGE_ROWS.schema)]
    with pytest.raises(NonDeterministicError) as caught:
        assert_deterministic(first_user_per_plan, {"events": EVENT_ROWS, "changes": CHANGE_ROWS}, mode="spark",
                             spark=streamjoin_spark, end=end, max_examples=1, shrink_budget=1, max_batches=1,
                             partitions=(1,), stores=("memory",), disturb=False)
    failure = caught.value.failure
    assert failure.plan.partitions == 1 and "first_user" in str(caught.value).split("Difference:")[1]
    assert len(failure.batch.rows) == len(failure.stream.rows) and failure.batch.rows != failure.stream.rows
