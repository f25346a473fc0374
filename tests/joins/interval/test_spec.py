"""The interval join's definition: argument checks, output columns and the clash rule."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from streamjoin.errors import JoinDefinitionError
from streamjoin.interval.operator import IntervalJoin

SEC = dt.timedelta(seconds=1)
LEFT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("v", pa.string()), ("only_l", pa.int8())])
RIGHT = pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us", "UTC")), ("v", pa.string()), ("w", pa.int64())])


def make(left=LEFT, right=RIGHT, on="k", **kw):
    args = dict(left_time="ts", right_time="ts", lower=-SEC, upper=SEC, delay=SEC)
    args.update(kw)
    return IntervalJoin(left, right, on, **args)


def test_interval_spec_output_has_keys_once_then_left_then_right_with_suffixes():
    op = make()
    assert op.output_schema.names == ["k", "ts_left", "v_left", "only_l", "ts_right", "v_right", "w"]
    assert op.output_schema.field("ts_right").type == pa.timestamp("us", "UTC")
    assert all(f.nullable for f in op.output_schema)


def test_interval_spec_right_column_named_like_a_key_gets_right_suffix():
    right = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("k", pa.string())])
    op = make(right=right, on=(["k"], ["id"]), how="full")
    assert op.output_schema.names == ["k", "ts_left", "v", "only_l", "ts_right", "k_right"]


def test_interval_spec_names_that_differ_only_in_case_clash():
    # in Spark the output's Val and val were one ambiguous name: every join of it failed
    right = pa.schema([("k", pa.int64()), ("TS", pa.timestamp("us")), ("V", pa.string())])
    op = make(right=right, right_time="TS")
    assert op.output_schema.names == ["k", "ts_left", "v_left", "only_l", "TS_right", "V_right"]


def test_interval_spec_refuses_names_that_still_clash_after_suffixes():
    left = LEFT.append(pa.field("v_left", pa.string()))
    with pytest.raises(JoinDefinitionError, match="v_left.*rename"):
        make(left=left)


def test_interval_spec_semi_and_anti_output_the_left_schema():
    for how in ("left_semi", "left_anti"):
        assert make(how=how).output_schema == LEFT


def test_interval_spec_accepts_a_list_and_a_pair_of_lists():
    left = LEFT.append(pa.field("k2", pa.string()))
    right = pa.schema([("a", pa.int32()), ("b", pa.large_string()), ("ts", pa.timestamp("ms"))])
    op = make(left=left, right=right, on=(["k", "k2"], ["a", "b"]))
    assert op.output_schema.names[:2] == ["k", "k2"]
    assert op.output_schema.field("k2").type == pa.large_string()
    assert [i.key for i in op.inputs] == [("k", "k2"), ("a", "b")]
    assert make(on=["k"]).inputs[1].key == ("k",)


@pytest.mark.parametrize("kwargs, message", [
    (dict(on="nope"), "left input has no column 'nope'"),
    (dict(on=[]), "one or more column names"),
    (dict(on=(["k"], ["k", "w"])), "left key has 1 columns"),
    (dict(on=["k", "k"]), "names a column twice"),
    (dict(on=42), "column name, a list of names or a pair"),
    (dict(left_time="v"), "time column 'v' must be a timestamp"),
    (dict(right_time="missing"), "right input has no column 'missing'"),
    (dict(lower=2 * SEC, upper=SEC), "lower .* must be <= upper"),
    (dict(delay=-SEC), "delay .* must be >= 0"),
    (dict(lower=5), "lower must be a datetime.timedelta"),
    (dict(how="cross"), "unknown how='cross'; use one of inner, left, right, full, left_semi, left_anti"),
    (dict(bucket=dt.timedelta(0)), "bucket must be a positive duration"),
    (dict(blob_rows=0), "blob_rows must be a positive int"),
    (dict(compression="gzip"), "compression must be one of"),
    (dict(left_delay=-SEC), "left_delay .* must be >= 0"),
    (dict(right_delay="5 mins"), "right_delay"),
    (dict(watermark_policy="slowest"), "watermark_policy must be one of \\('min', 'max'\\)"),
])
def test_interval_spec_rejects_bad_arguments(kwargs, message):
    with pytest.raises(JoinDefinitionError, match=message):
        make(**kwargs)


@pytest.mark.parametrize("left_type, right_type, common", [
    (pa.int64(), pa.int64(), pa.int64()),
    (pa.int32(), pa.int64(), pa.int64()),
    (pa.uint8(), pa.int8(), pa.int16()),
    (pa.string(), pa.large_string(), pa.large_string()),
    (pa.binary(), pa.large_binary(), pa.large_binary()),
    (pa.date32(), pa.date32(), pa.date32()),
    (pa.dictionary(pa.int32(), pa.string()), pa.large_string(), pa.large_string()),
])
def test_interval_spec_key_types_widen_losslessly(left_type, right_type, common):
    left = pa.schema([("k", left_type), ("ts", pa.timestamp("us"))])
    right = pa.schema([("k", right_type), ("ts", pa.timestamp("us"))])
    assert make(left=left, right=right).output_schema.field("k").type == common


@pytest.mark.parametrize("left_type, right_type", [
    (pa.int64(), pa.uint64()),
    (pa.int64(), pa.float64()),
    (pa.int64(), pa.string()),
    (pa.list_(pa.int64()), pa.list_(pa.int64())),
    (pa.timestamp("us"), pa.timestamp("ms")),
])
def test_interval_spec_rejects_incompatible_or_unhashable_key_types(left_type, right_type):
    left = pa.schema([("k", left_type), ("ts", pa.timestamp("us"))])
    right = pa.schema([("k", right_type), ("ts", pa.timestamp("us"))])
    with pytest.raises(JoinDefinitionError, match="key columns left 'k'"):
        make(left=left, right=right)


@pytest.mark.parametrize("schema, message", [
    (pa.schema([("k", pa.int64()), ("ts", pa.timestamp("ns"))]), "unit s, ms or us"),
    (pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("_reason", pa.string())]), "reserves"),
    (pa.schema([("k", pa.int64()), ("ts", pa.timestamp("us")), ("k", pa.int8())]), "duplicate column"),
])
def test_interval_spec_rejects_bad_schemas(schema, message):
    with pytest.raises(JoinDefinitionError, match=message):
        make(left=schema)


def test_interval_spec_definition_is_json_and_identifies_the_join():
    a, b = make().definition(), make(how="left").definition()
    assert json.loads(json.dumps(a)) == a
    assert a != b and a == make().definition()
    assert a["lower_us"] == -1_000_000 and a["bucket_us"] == 1_000_000
    assert make(upper=dt.timedelta(hours=4)).definition()["bucket_us"] == 3_600_000_000


def test_interval_spec_definition_is_unchanged_without_per_input_delays_or_policy():
    before = json.dumps(make().definition(), sort_keys=True)
    assert json.dumps(make(left_delay=SEC, right_delay=SEC, watermark_policy="min").definition(),
                      sort_keys=True) == before
    assert "delays_us" not in before and "watermark_policy" not in before


def test_interval_spec_definition_records_per_input_delays_and_policy():
    base = make().definition()
    delays = make(left_delay=10 * SEC, right_delay="2 hours").definition()
    assert delays["delays_us"] == [10_000_000, 7_200_000_000] and delays != base
    assert make(watermark_policy="MAX").definition()["watermark_policy"] == "max"
    assert make(right_delay=2 * SEC).definition()["delays_us"] == [1_000_000, 2_000_000]


def test_interval_spec_watermark_is_min_or_max_of_the_inputs_watermarks():
    spec = make(left_delay=10 * SEC, right_delay=7200 * SEC).spec
    floor = -(2 ** 62)
    assert spec.watermark((100_000_000_000, 100_000_000_000), floor) == 100_000_000_000 - 7_200_000_000
    assert spec.watermark((100_000_000_000, None), floor) == floor
    fast = make(left_delay=10 * SEC, right_delay=7200 * SEC, watermark_policy="max").spec
    assert fast.watermark((100_000_000_000, 100_000_000_000), floor) == 100_000_000_000 - 10_000_000


def test_interval_spec_repr_names_the_join():
    assert repr(make(how="full")).startswith("IntervalJoin(on=(['k'], ['k']), left_time='ts'")
