"""``streamjoin bench table --floor-packed``: its first stage's rows are each order change's join
key and its ``pack`` bytes, which decode to the change's values (no Spark)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamjoin.bench.table import ORDERS, pack_routed
from streamjoin.statestore.packed_columns import unpack_columns


def test_table_floor_packed_rows_decode_to_the_changes():
    at = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    batch = pa.RecordBatch.from_pylist([
        {"order_id": 1, "op": "upsert", "changed_at": at, "customer_id": 7, "amount": 250, "status": "paid"},
        {"order_id": 2, "op": "delete", "changed_at": at, "customer_id": 9, "amount": None, "status": None},
    ], schema=ORDERS)
    [out] = list(pack_routed(iter([batch])))
    assert out.schema.names == ["customer_id", "_row"]
    assert out.column(0).to_pylist() == [7, 9]
    physical = [pa.int64() if pa.types.is_timestamp(f.type) else f.type for f in ORDERS]
    decoded = unpack_columns(out.column(1), physical)
    micros = int(at.timestamp() * 1_000_000)
    assert [c.to_pylist() for c in decoded] == [[1, 2], ["upsert", "delete"], [micros, micros], [7, 9], [250, None],
                                                ["paid", None]]
