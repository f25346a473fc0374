"""The enrichment benchmark's generated workload (no Spark, no timing): its shape, that nothing
in it is late for the join's watermarks, and that Spark's static copy is the table after every
update."""

from __future__ import annotations

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
