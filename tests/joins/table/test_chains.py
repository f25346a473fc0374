"""Views over three tables: a chain of two table-table joins, the first one's output read as it
comes by the second, equals the relational three-way join after every micro-batch (inserts,
updates, deletes, foreign-key moves, primary-key changes, stale changes), with local state lost at
either join; and its change times are the times of the input changes that caused them."""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat, detect_vocabulary, normalise
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from streamjoin.table.operator import TableTableJoin
from streamjoin.testing.enrichment import reference_as_of
from tests.examples import scaled
from tests.joins.drivers import InProcess, StepChain
from tests.joins.table.chains import CUSTOMERS, ORDERS, PRODUCTS, ChainCase, ChainRun, chain_cases, when


def check_chain(case: ChainCase, run: ChainRun, disturb=None) -> None:
    for index, (first, three) in enumerate(case.expected()):
        if disturb is not None:
            disturb(index)
        run.run(index)
        assert run.view_rows() == (first, three), f"batch {index}"


@settings(max_examples=scaled(60))
@given(case=chain_cases())
def test_table_join_chain_of_three_tables_equals_reference_after_every_batch(case):
    event(f"how: {case.how}, view on the right: {case.flip}")
    run = ChainRun(case)
    event(f"second join's stages: {list(run.second.plan.names)}")
    try:
        check_chain(case, run)
    finally:
        run.close()


@settings(max_examples=scaled(12))
@given(case=chain_cases(max_changes=6, max_batches=3, max_partitions=2), data=st.data())
def test_table_join_chain_with_local_state_lost_at_one_join_equals_reference(case, data):
    run = ChainRun(case, runtime=True)

    def disturb(index: int) -> None:
        which = data.draw(st.sampled_from(["none", "first", "second"]))
        event(f"lost: {which}")
        if which != "none":
            driver = run.drivers[0 if which == "first" else 1]
            driver.runner.lose_local_state(data.draw(st.sampled_from([None, 0])))

    try:
        check_chain(case, run, disturb)
    finally:
        run.close()


def _orders(*rows):
    return pa.Table.from_pylist([dict(zip(ORDERS.names, r)) for r in rows], schema=ORDERS)


def _customers(*rows):
    return pa.Table.from_pylist([dict(zip(CUSTOMERS.names, r)) for r in rows], schema=CUSTOMERS)


def _products(*rows):
    return pa.Table.from_pylist([dict(zip(PRODUCTS.names, r)) for r in rows], schema=PRODUCTS)


def test_table_join_output_is_detected_as_the_streamjoin_vocabulary():
    first = TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                           right_key="customer_id", left_time="o_at", right_time="c_at")
    assert detect_vocabulary(first.output_schema).name == "streamjoin"
    second = TableTableJoin(PRODUCTS, first.output_schema, (["product_id"], ["prod"]), left_key="product_id",
                            right_key="order_id", left_time="p_at")
    assert second.spec.right.changes == ChangeFormat.streamjoin("order_id")
    # the bookkeeping columns are the vocabulary's, not row columns: none is renamed or doubled
    assert second.output_schema.names[-4:] == ["_change_type", "_commit_version", "_seq", "_change_timestamp"]
    assert [n for n in second.output_schema.names if n.startswith("_")] == second.output_schema.names[-4:]


def test_table_join_refuses_a_change_time_or_retention_for_a_view_input():
    first = TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                           right_key="customer_id", left_time="o_at", right_time="c_at")
    with pytest.raises(JoinDefinitionError, match="ordered by _commit_version and _seq"):
        TableTableJoin(first.output_schema, PRODUCTS, (["prod"], ["product_id"]), left_key="order_id",
                       right_key="product_id", left_time="o_at", right_time="p_at")
    with pytest.raises(JoinDefinitionError, match="retention"):
        TableTableJoin(first.output_schema, PRODUCTS, (["prod"], ["product_id"]), left_key="order_id",
                       right_key="product_id", right_time="p_at", retention=dt.timedelta(days=1))
    # the other table's own delay is a horizon for that table only
    kept = TableTableJoin(first.output_schema, PRODUCTS, (["prod"], ["product_id"]), left_key="order_id",
                          right_key="product_id", right_time="p_at", right_delay=dt.timedelta(days=1))
    assert kept.left_stage.retention is None and kept.right_stage.retention is not None


def test_streamjoin_vocabulary_keeps_keys_with_a_padded_side_and_orders_by_version():
    schema = pa.schema([("a", pa.int64()), ("b", pa.int64()), ("_change_type", pa.string()),
                        ("_commit_version", pa.int64()), ("_seq", pa.int64()),
                        ("_change_timestamp", pa.timestamp("us", "UTC"))])
    t = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
    table = pa.Table.from_pylist([
        {"a": 1, "b": None, "_change_type": "insert", "_commit_version": 3, "_seq": 1, "_change_timestamp": t},
        {"a": None, "b": None, "_change_type": "insert", "_commit_version": 3, "_seq": 1, "_change_timestamp": t},
        {"a": 1, "b": 2, "_change_type": "update_preimage", "_commit_version": 4, "_seq": 0, "_change_timestamp": t},
    ], schema=schema)
    result = normalise(table, ChangeFormat.streamjoin(["a", "b"]))
    assert result.counts["null_key"] == 1 and result.counts["preimages"] == 1
    assert result.changes.column("a").to_pylist() == [1]
    assert result.changes.column("__sj_seq").to_pylist() == [(3 << 16) + 1]


def test_table_join_view_change_times_are_the_causing_changes_times():
    """An order placed at 5 s joins a customer changed at 2 s: the insert's time is 5 s; the
    customer's later change (at 9 s) updates the view at 9 s; the product's change reaches the
    three-table view with its own time, in a later batch."""
    first = TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                           right_key="customer_id", left_time="o_at", right_time="c_at")
    case = ChainCase(("inner", "inner"), [], (1, 1))
    run = ChainRun(case)
    batches = [
        [_orders((1, 10, "a", 1, "upsert", when(5))), _customers((10, "ann", "upsert", when(2))),
         _products(("a", "pen", "upsert", when(1)))],
        [_orders(), _customers((10, "bo", "upsert", when(9))), _products()],
        [_orders(), _customers(), _products(("a", "ink", "upsert", when(7)))],
    ]
    case.tables = lambda i: batches[i]   # type: ignore[method-assign]
    try:
        times = []
        for index in range(3):
            out = run.run(index)[1]
            times.append(sorted((r["_change_type"], r["_change_timestamp"].second) for r in out.to_pylist()))
        assert times == [[("insert", 5)], [("update_postimage", 9), ("update_preimage", 9)],
                         [("update_postimage", 7), ("update_preimage", 7)]]
        assert first.output_schema.field("_change_timestamp").type == pa.timestamp("us", "UTC")
    finally:
        run.close()


def test_table_join_chain_applies_a_view_change_with_an_older_time_in_version_order():
    """A customer's change at 2 s arrives after an order placed at 5 s joined its earlier version:
    the view update carries 2 s, older than the insert's 5 s, and the next join still applies it."""
    case = ChainCase(("inner", "left"), [], (2, 1))
    batches = [
        [_orders((1, 10, "a", 1, "upsert", when(5))), _customers((10, "ann", "upsert", when(1))),
         _products(("a", "pen", "upsert", when(1)))],
        [_orders(), _customers((10, "bob", "upsert", when(2))), _products()],
    ]
    case.tables = lambda i: batches[i]   # type: ignore[method-assign]
    run = ChainRun(case)
    try:
        run.run(0)
        first, three = run.run(1)
        assert sorted(first.column("_change_timestamp").to_pylist())[0].second == 2
        assert [r["name"] for r in run.views[1].rows().to_pylist()] == ["bob"]
    finally:
        run.close()


EVENTS = pa.schema([("order_id", pa.int64()), ("ts", pa.timestamp("us")), ("n", pa.int64())])


@settings(max_examples=scaled(25))
@given(case=chain_cases(max_batches=4), data=st.data())
def test_stream_enriched_as_of_from_a_view_equals_the_reference_as_of_join(case, data):
    """Events (shipments of orders) enriched, as of their time, from the change stream of the view
    orders x customers (as it comes: its key the order, its change time ``_change_timestamp``)
    equal the as-of join of the events with that change history."""
    case.how, case.flip = (data.draw(st.sampled_from(["inner", "left"])), "inner"), False
    first = case.first()
    events = [[{"order_id": data.draw(st.sampled_from([1, 2, 3, 4, None])), "ts": when(data.draw(st.integers(0, 9))),
                "n": i * 10 + j} for j in range(data.draw(st.integers(0, 3)))] for i in range(len(case.batches))]
    join = EnrichmentJoin(EVENTS, first.output_schema, "order_id", stream_time="ts",
                          changes=ChangeFormat.streamjoin("order_id"), mode="as_of", how="left")
    views = StepChain(first, lambda i: case.tables(i)[:2], partitions=case.partitions[0])
    outputs: list[pa.Table] = []
    enriched = InProcess(join, lambda i: [pa.Table.from_pylist(events[i], EVENTS), outputs[i]],
                         partitions=case.partitions[1])
    try:
        got = []
        for index in range(len(case.batches)):
            outputs.append(views.run(index))
            got += enriched.run(index).to_pylist()
        got += enriched.run(None).to_pylist()
    finally:
        views.close()
        enriched.close()
    values = [n for n in first.output_schema.names if n not in ("order_id", *CDF)]
    batches = [([{"key": (e["order_id"],), "time": _micros(e["ts"]), "row": (e["order_id"], e["ts"], e["n"])}
                 for e in batch],
                [{"key": (c["order_id"],), "op": "delete" if c["_change_type"] == "delete" else "upsert",
                  "time": _micros(c["_change_timestamp"]), "seq": (c["_commit_version"] << 16) + c["_seq"],
                  "row": tuple(c[n] for n in values)}
                 for c in out.to_pylist() if c["_change_type"] != "update_preimage"])
               for batch, out in zip(events, outputs)]
    expected = reference_as_of(batches, how="left", delay=0, width=len(values))
    event(f"matched: {sum(r[3] is not None for r in expected) > 0}")
    assert Counter(tuple(r.values()) for r in got) == Counter(expected)


CDF = ("_change_type", "_commit_version", "_seq", "_change_timestamp")


def _micros(value: dt.datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.timezone.utc)
    return (value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)


def test_streamjoin_vocabulary_sets_aside_changes_of_a_key_that_is_not_the_view_key():
    """Orders x order lines, keyed by the order alone: two lines of one order are two view rows
    of one key, which are set aside with the reason, not applied in an arbitrary order."""
    first = TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                           right_key="customer_id", left_time="o_at", right_time="c_at")
    rows = [{"order_id": 1, "cust": 10, "customer_id": 10, "_change_type": "insert", "_commit_version": 0,
             "_seq": 1, "_change_timestamp": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)}] * 2
    rows.append({**rows[0], "order_id": 2})
    table = pa.Table.from_pylist(rows, schema=first.output_schema)
    result = normalise(table, ChangeFormat.streamjoin("cust"))
    assert result.counts["not_a_view_key"] == 3 and result.changes.num_rows == 0
    assert result.aside.column("_reason").to_pylist()[0].startswith("two changes of one key")
    result = normalise(table, ChangeFormat.streamjoin(["order_id", "customer_id"]))
    assert result.counts["not_a_view_key"] == 2 and result.changes.column("order_id").to_pylist() == [2]


def test_checkpoint_cli_describes_and_verifies_each_join_of_a_chain(capsys):
    """Each join of a chain has its own checkpoint: the CLI describes (the second join's left key
    stage reads the first view's changes in the streamjoin vocabulary, keyed by the view key) and
    verifies each."""
    import json

    from streamjoin.jobs.cli import main

    case = ChainCase(("inner", "left"), [], (2, 1))
    batches = [[_orders((1, 10, "a", 1, "upsert", when(5))), _customers((10, "ann", "upsert", when(1))),
                _products(("a", "pen", "upsert", when(1)))]]
    case.tables = lambda i: batches[i]   # type: ignore[method-assign]
    run = ChainRun(case, runtime=True)
    try:
        run.run(0)
        described = []
        for driver in run.drivers:
            capsys.readouterr()
            assert main(["checkpoint", "describe", f"{driver.root}/checkpoint", "--json"]) == 0
            described.append(json.loads(capsys.readouterr().out))
            assert main(["checkpoint", "verify", f"{driver.root}/checkpoint"]) == 0
        assert [[r["kind"] for r in d] for d in described] == [["table_join_keys", "table_join_keys", "table_join"]] * 2
        changes = described[1][0]["definition"]["changes"]
        assert (changes["vocabulary"], changes["key"]) == ("streamjoin", ["order_id", "customer_id"])
    finally:
        run.close()


def test_postgres_sink_leaves_the_change_time_out_of_the_target_columns():
    from streamjoin.spark.postgres_sink import PostgresSink

    first = TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                           right_key="customer_id", left_time="o_at", right_time="c_at")
    sink = PostgresSink("postgresql://unused", "lines", key="order_id")
    rows = sink._final_rows(first.output_schema.empty_table())
    assert rows.column_names == [n for n in first.view_schema.names] + ["_sj_delete"]
