"""The enrichment benchmark's generated workload (no Spark, no timing): its shape, that nothing
in it is late for the join's watermarks, and that Spark's static copy is the table after every
update."""

from __future__ import annotations

import argparse

import numpy as np
import pyarrow as pa

from streamjoin.bench.enrichment import DELAY_S, Params, generate


def _us(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).cast(pa.int64()).to_numpy()


def test_enrichment_workload_shape_and_final_table():
    params = Params(events=3_000, table_rows=400, updates=250, batches=3, partitions=2)
    inputs = generate(params)
    assert sum(t.num_rows for t in inputs.events) == 3_000
    assert [t.column("op").to_pylist().count("heartbeat") for t in inputs.changes] == [1, 1, 1]
    assert sum(t.num_rows for t in inputs.changes) == 250 + 3
    assert inputs.snapshot.num_rows == inputs.final.num_rows == 400

    delay = DELAY_S * 1_000_000
    for b in range(1, params.batches):  # no event or change older than the previous batch's watermark
        assert _us(inputs.events[b], "ts").min() >= _us(inputs.events[b - 1], "ts").max() - delay
        assert _us(inputs.changes[b], "changed_at").min() >= _us(inputs.changes[b - 1], "changed_at").max() - delay
    heartbeats = [_us(t, "changed_at")[-1] for t in inputs.changes]
    assert all(_us(t, "ts").max() <= h for t, h in zip(inputs.events, heartbeats))
    assert all(_us(f, "changed_at")[0] > heartbeats[-1] + delay for f in inputs.flush)

    updates = [r for t in inputs.changes for r in t.to_pylist() if r["op"] == "update"]
    table = {r["user_id"]: r for r in inputs.snapshot.to_pylist()}
    for change in sorted(updates, key=lambda r: r["changed_at"]):
        table[change["user_id"]] = {k: change[k] for k in inputs.final.column_names}
    assert [table[k] for k in sorted(table)] == inputs.final.to_pylist()

    last_change: dict[int, object] = {}
    for change in updates:
        last_change[change["user_id"]] = max(change["changed_at"], last_change.get(change["user_id"], change["changed_at"]))
    events = [r for t in inputs.events for r in t.to_pylist()]
    assert all(0 <= e["user_id"] < 400 for e in events)
    assert inputs.stale_events == sum(1 for e in events if e["user_id"] in last_change
                                      and e["ts"] < last_change[e["user_id"]])


def test_enrichment_workload_user_typed_inputs_have_zoneless_timestamps(tmp_path):
    import argparse

    import pyarrow.parquet as pq

    from streamjoin.bench.enrichment import add_arguments, generate, write_inputs

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    params = Params.from_args(parser.parse_args(["--events", "200", "--table-rows", "50", "--batches", "2",
                                                 "--user-typed"]))
    assert params.user_typed
    inputs = generate(params)
    write_inputs(str(tmp_path), inputs, params.user_typed)
    # the snapshot: a zone-less INT96 timestamp (spark.read.parquet reads it as TIMESTAMP), same times
    snapshot = pq.ParquetFile(tmp_path / "snapshot.parquet")
    assert snapshot.schema.column(snapshot.schema.names.index("changed_at")).physical_type == "INT96"
    assert _us(pq.read_table(tmp_path / "snapshot.parquet", coerce_int96_timestamp_unit="us"), "changed_at").tolist() == \
        _us(inputs.snapshot, "changed_at").tolist()
    # the streams: timestamps without a zone (TIMESTAMP_NTZ), same wall-clock times as UTC
    events = pq.read_table(tmp_path / "events" / "part-0000.parquet")
    assert events.schema.field("ts").type == pa.timestamp("us")
    assert _us(events, "ts").tolist() == _us(inputs.events[0], "ts").tolist()


def test_enrichment_goal_table_shows_the_goal_beside_the_ratio():
    from streamjoin.bench.enrichment import Outcome, goal_table
    from streamjoin.bench.goals import GOALS

    results = {"spark-stream-static": [Outcome(30.0, 0.0, 1, 1)], "streamjoin-arranged": [Outcome(20.0, 5.0, 1, 1)]}
    goal = next(g for g in GOALS if g.bench == "enrichment")
    assert goal_table(results).rows == [["streamjoin-arranged vs spark-stream-static", 1.5, goal.text(), "yes"]]
    assert goal_table({"streamjoin-arranged": results["streamjoin-arranged"]}).rows == []


def test_enrichment_summary_table_shows_the_first_micro_batch_and_its_wait_for_offsets():
    from streamjoin.bench.enrichment import Outcome, Params, summary_table

    params = Params.from_args(argparse.Namespace(events=1000, table_rows=100, update_fraction=0.1, batches=2,
                                                 partitions=2, user_typed=False))
    runs = [Outcome(10.0, 0.5, 1000, 4, [2.5, 1.0, 1.0, 0.5], first_offsets=1.5, join={"matched": 1000, "events_waiting": 0}),
            Outcome(12.0, 0.7, 1000, 4, [3.5, 1.0, 1.0, 0.5], first_offsets=2.5, join={"matched": 1000, "events_waiting": 0})]
    table = summary_table(params, {"streamjoin-arranged": runs})
    row = dict(zip(table.columns, table.rows[0]))
    assert (row["seconds"], row["first batch s"], row["of which offsets"]) == (11.0, 3.0, 2.0)   # medians
