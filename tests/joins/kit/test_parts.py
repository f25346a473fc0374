"""The join kit's parts on their own: one How, on, names, order, keys, arrivals and options."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

import streamjoin.kit as kit
from streamjoin.errors import JoinDefinitionError
from streamjoin.kit.arrivals import sort_out
from streamjoin.kit.how import How, parse_how
from streamjoin.kit.keys import common_key_type, family_key_type, routing_key_type
from streamjoin.kit.names import check_output_names, check_reserved, check_schema, clashes, suffixed
from streamjoin.kit.on import column_names, parse_on
from streamjoin.kit.order import canonical_sort_keys, sort_canonically
from streamjoin.runtime.operator import REASON_COLUMN
from streamjoin.runtime.options import JoinOptions


def test_kit_exports_every_name_it_lists():
    assert all(hasattr(kit, name) for name in kit.__all__)
    for old in ("parse_how", "parse_duration", "normal_keys", "normal_key_array", "MAX_DURATION_US", "HOW_ALIASES"):
        assert old in kit.__all__


def test_how_is_one_enum_for_every_join():
    from streamjoin.enrichment.spec import How as EnrichmentHow
    from streamjoin.interval.spec import How as IntervalHow
    from streamjoin.table.spec import How as TableHow
    assert EnrichmentHow is IntervalHow is TableHow is How


@pytest.mark.parametrize("how, left, right", [
    (How.INNER, False, False), (How.LEFT, True, False), (How.RIGHT, False, True), (How.FULL, True, True),
    (How.LEFT_SEMI, False, False), (How.LEFT_ANTI, False, False),
])
def test_how_preserves_only_outer_sides(how, left, right):
    assert (how.preserves("left"), how.preserves("right")) == (left, right)
    assert how.emits_unmatched("left") == (left or how is How.LEFT_ANTI)


def test_how_parse_returns_the_enum_within_the_allowed_kinds():
    assert parse_how("full_outer", [How.INNER, How.FULL]) is How.FULL
    with pytest.raises(JoinDefinitionError, match="does not support; use one of inner, left"):
        parse_how("right", [How.INNER, How.LEFT])


@pytest.mark.parametrize("on, expected", [
    ("k", (("k",), ("k",))), (["a", "b"], (("a", "b"), ("a", "b"))), ((["a"], ["b"]), (("a",), ("b",))),
])
def test_on_parse_reads_each_spelling(on, expected):
    assert parse_on(on) == expected


@pytest.mark.parametrize("on", [3, [], (["a"], ["b", "c"]), ["a", "a"], [1]])
def test_on_parse_refuses_what_names_no_columns(on):
    with pytest.raises(JoinDefinitionError, match="on"):
        parse_on(on)


def test_on_column_names_refuses_repeats_and_empties():
    assert column_names("a", "key") == ("a",)
    for bad in ([], ["a", "a"], None):
        with pytest.raises(JoinDefinitionError, match="key must be one or more distinct column names"):
            column_names(bad, "key")


def test_names_suffix_clashes_and_refuse_what_still_repeats():
    assert suffixed(["a", "b"], {"b"}, "_left") == ["a", "b_left"]
    check_output_names(["a", "b_left", "b_right"], "_left/_right")
    with pytest.raises(JoinDefinitionError, match=r"\['x_left'\] appear twice"):
        check_output_names(["x_left", "x_left"], "_left/_right")


def test_names_clash_as_spark_resolves_names_whatever_their_case():
    # Spark resolves names case-insensitively by default: Val and val in one output are ambiguous
    assert clashes(["k", "Val"], ["val", "w"]) == {"Val", "val"}
    assert suffixed(["k", "Val"], {"val"}, "_left") == ["k", "Val_left"]
    with pytest.raises(JoinDefinitionError, match=r"\['X_left', 'x_left'\] appear twice"):
        check_output_names(["X_left", "x_left"], "_left/_right")


def test_names_schema_and_reserved_checks_name_the_input():
    with pytest.raises(JoinDefinitionError, match="the left input has duplicate column names"):
        check_schema(pa.schema([("a", pa.int64()), ("a", pa.string())]), "left")
    with pytest.raises(JoinDefinitionError, match="the left schema must be a pyarrow.Schema"):
        check_schema({"a": 1}, "left")
    with pytest.raises(JoinDefinitionError, match="'_reason', a name streamjoin reserves"):
        check_reserved(["_reason"], [REASON_COLUMN], "the left input")


def test_order_puts_nulls_first_and_sorts_dictionaries_by_value():
    table = pa.table({
        "t": pa.array([2, None, 1], pa.int64()),
        "d": pa.array(["b", "a", "c"]).dictionary_encode(),
    })
    keys = canonical_sort_keys(table.schema, ["t"])
    assert [k[2] for k in keys] == ["at_start", "at_start"]
    assert sort_canonically(table, keys).column("t").to_pylist() == [None, 1, 2]
    ties = pa.table({"t": [1, 1, 1], "d": pa.array(["z", "a", None]).dictionary_encode()})
    ordered = sort_canonically(ties, canonical_sort_keys(ties.schema, ["t"]))
    assert ordered.column("d").to_pylist() == [None, "a", "z"]


def test_order_leaves_out_columns_neither_arrow_nor_their_bytes_sort():
    schema = pa.schema([("t", pa.int64()), ("h", pa.list_(pa.float16())), ("s", pa.list_(pa.int64())),
                        ("v", pa.string())])
    assert [k[0] for k in canonical_sort_keys(schema, ["t"])] == ["t", "s", "v"]


def test_order_breaks_ties_by_nested_columns_element_by_element():
    ties = pa.table({"t": [1, 1, 1, 1, 1], "s": pa.array([[2], [1, 5], None, [1], []], pa.list_(pa.int64()))})
    for rotation in range(ties.num_rows):   # whatever order the rows come in
        rows = ties.take(pa.array([(i + rotation) % ties.num_rows for i in range(ties.num_rows)]))
        ordered = sort_canonically(rows, canonical_sort_keys(rows.schema, ["t"]))
        assert ordered.column("s").to_pylist() == [None, [], [1], [1, 5], [2]]


@pytest.mark.parametrize("left, right, common", [
    (pa.int32(), pa.int64(), pa.int64()), (pa.float32(), pa.float64(), pa.float64()),
    (pa.string(), pa.large_string(), pa.large_string()), (pa.dictionary(pa.int8(), pa.string()), pa.string(), pa.string()),
])
def test_keys_common_type_widens_losslessly(left, right, common):
    assert common_key_type("l", left, "r", right) == common


def test_keys_common_type_refuses_lossy_or_mixed_families():
    for left, right in ((pa.int64(), pa.uint64()), (pa.int64(), pa.string()), (pa.int64(), pa.float64())):
        with pytest.raises(JoinDefinitionError, match="incompatible types"):
            common_key_type("l", left, "r", right)


def test_keys_common_type_refuses_a_decimal_wider_than_38_digits_saying_what_to_cast_to():
    # Spark has no decimal above 38 digits, so the widening of these two could not be routed
    with pytest.raises(JoinDefinitionError, match=r"compare only as decimal\(41,5\).* e\.g\. decimal\(38,5\)"):
        common_key_type("l", pa.decimal128(38, 2), "r", pa.decimal128(10, 5))
    assert common_key_type("l", pa.decimal128(20, 2), "r", pa.decimal128(10, 5)) == pa.decimal128(23, 5)


def test_keys_family_type_is_the_familys_wide_type():
    assert family_key_type("e", pa.int8(), "t", pa.uint64()) == pa.int64()
    assert family_key_type("e", pa.string(), "t", pa.large_string()) == pa.large_string()
    with pytest.raises(JoinDefinitionError, match="must both be integers, strings, binary or booleans"):
        family_key_type("e", pa.float64(), "t", pa.float64())


def test_keys_routing_type_keeps_equal_types_and_routes_integer_mixes_as_int64():
    assert routing_key_type([("a", pa.int32()), ("b", pa.int32())]) == pa.int32()
    assert routing_key_type([("a", pa.int16()), ("b", pa.int32())]) == pa.int64()
    assert routing_key_type([("a", pa.float32()), ("b", pa.float64())]) == pa.float64()
    assert routing_key_type([("a", pa.decimal128(10, 2)), ("b", pa.decimal128(12, 4))]) == pa.decimal128(12, 4)
    with pytest.raises(JoinDefinitionError, match="'a'.*'b'.*incompatible"):
        routing_key_type([("a", pa.int64()), ("b", pa.string())])


def test_arrivals_sort_out_puts_each_row_in_one_group():
    schema = pa.schema([("k", pa.int64()), ("t", pa.timestamp("us"))])
    table = pa.table({"k": [1, None, 3, 4, None], "t": pa.array([5, 6, None, 1, 1], pa.timestamp("us"))}, schema=schema)
    found = sort_out(table, schema=schema, name="left", order=canonical_sort_keys(schema, ["t", "k"]),
                     time="t", key=["k"], watermark=3)
    assert found.counts() == {"late": 2, "null_time": 1, "null_key": 1, "heartbeat": 0}
    assert (found.null_time.astype(int) + found.late + found.null_key + found.keep == 1).all()
    assert found.table.filter(found.keep).column("k").to_pylist() == [1]
    kept_keyless = found.aside(keyless_kept=True)
    assert kept_keyless.column(REASON_COLUMN).to_pylist() == ["null event time", "late", "late"]
    assert found.aside(keyless_kept=False).column(REASON_COLUMN).to_pylist()[-1] == "null key"
    assert np.array_equal(found.times, [0, 1, 1, 5, 6])


def test_options_validate_once_and_build_the_state_config(tmp_path):
    options = JoinOptions(store="rocksdb", partitions=3, store_options={"sync": True}, state_dir=tmp_path)
    assert (options.state.store, dict(options.state.store_options), options.state.local_dir) == \
        ("rocksdb", {"sync": True}, str(tmp_path))
    moved = options.at("/somewhere/join")
    assert moved.checkpoint == "/somewhere/join" and moved.state == options.state


@pytest.mark.parametrize("arguments, message", [
    ({"partitions": 0}, "partitions must be an int of at least 1, not 0"),
    ({"partitions": -1, "max_partitions": 64}, r"partitions must be an int from 1 to 64 \(the join's key groups, max_partitions.*not -1"),
    ({"partitions": 2.0}, "partitions must be an int of at least 1, not 2.0"),
    ({"partitions": "3"}, "partitions must be an int"),
    ({"partitions": True}, "partitions must be an int"),
    ({"checkpoint": 5}, "checkpoint must be a str"),
    ({"store_options": ["a"]}, "store_options must be a mapping"),
    ({"state_dir": 1}, "state_dir must be a local directory path"),
    ({"store": "no_such_store"}, "store='no_such_store'"),
    ({"store": "memory", "store_options": {"a": 1}}, "store kind 'memory' has no option 'a'; its options are none$"),
    # options of another backend without its name: the default kind is named, and the kind that takes them
    ({"store_options": {"map_size": 1 << 30}},
     r"store kind 'arranged' has no option 'map_size'.*; store='lmdb-kv' takes it \('arranged' is the default store kind\)"),
    ({"store": "rocksdb", "store_options": {"sync": "yes"}}, r"sync='yes'\): sync must be True or False"),
    ({"store": "lmdb-kv", "store_options": {"map_size": 0}}, "map_size must be a whole number of bytes"),
    ({"store": "arranged", "store_options": {"memory_budget": "1g"}}, "memory_budget must be a whole number of bytes"),
    ({"max_partitions": 0}, "max_partitions must be an int"),
    ({"max_partitions": "64"}, "max_partitions must be an int"),
    ({"partitions": 8, "max_partitions": 4}, r"partitions must be an int from 1 to 4 \(.*\), not 8"),
])
def test_options_refuse_bad_arguments_naming_them(arguments, message):
    with pytest.raises(JoinDefinitionError, match=message):
        JoinOptions(**arguments)


def test_options_default_store_is_the_arranged_one():
    from streamjoin.runtime.options import StateConfig

    assert JoinOptions().store == JoinOptions().state.store == StateConfig().store == "arranged"


def test_options_refuse_a_worker_budget_that_is_not_a_size_before_any_task(monkeypatch):
    monkeypatch.setenv("STREAMJOIN_WORKER_MEMORY", "lots")
    with pytest.raises(JoinDefinitionError, match="STREAMJOIN_WORKER_MEMORY='lots'.*e.g. 512m"):
        JoinOptions(store="arranged")
    with pytest.raises(JoinDefinitionError, match="STREAMJOIN_WORKER_MEMORY='lots'"):
        JoinOptions(store="rocksdb")   # the arranged store on RocksDB
    JoinOptions(store="rocksdb-kv")   # a store of one entry per state entry does not read it


def test_times_parse_durations_from_both_spellings():
    assert kit.parse_duration("delay", dt.timedelta(seconds=2)) == kit.parse_duration("delay", "2 seconds") == 2_000_000


def test_kit_leaves_no_private_imports_between_modules():
    import ast
    from pathlib import Path
    root = Path(__file__).resolve().parents[3] / "joins"   # the repository's joins/ (streamjoin)
    assert (root / "kit" / "__init__.py").is_file()        # (a wrong root would find nothing)
    private = [
        f"{path.relative_to(root)}: {node.module}.{alias.name}"
        for path in sorted(root.rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamjoin")
        for alias in node.names if alias.name.startswith("_") and alias.name != "__version__"
    ]
    assert private == []
