"""The interval join's watermark with per-input delays and the watermark policy (in process)."""

from __future__ import annotations

import datetime as dt
import tempfile

import pyarrow as pa
import pytest

from streamjoin.testing.local import LocalJoins

SCHEMA = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
T0 = dt.datetime(2026, 1, 1)


def rows(*pairs):
    return pa.Table.from_pylist([{"k": k, "t": T0 + dt.timedelta(seconds=s)} for k, s in pairs], schema=SCHEMA)


@pytest.mark.parametrize("policy, released", [("min", 0), ("max", 1)])
def test_interval_time_max_policy_releases_the_fast_inputs_outer_rows_after_its_delay(policy, released):
    batches = [(rows((1, 0)), rows((2, 0))), (rows((3, 20)), rows((4, 20))), (rows(), rows())]
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root)
        out = []
        for version, (left, right) in enumerate(batches):
            joins.begin(version)
            out.append(joins.interval_join(left, right, "k", left_time="t", right_time="t", lower="0 seconds",
                                           upper="0 seconds", delay="10 seconds", right_delay="2 hours",
                                           how="left", checkpoint=f"{root}/ck", watermark_policy=policy))
    # watermark of version 2: min(20 s - 10 s, 20 s - 2 h) (nothing released) or max(...) = 10 s
    assert sum(t.num_rows for t in out) == released
