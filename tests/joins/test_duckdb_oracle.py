"""The joins against DuckDB, an engine that shares no code with them, on small random inputs run
in process over every store, partition count and micro-batch split: the table-table join's view
against DuckDB's join of the two final tables, a chain of two (a view over three tables) against
its three-way join, the interval join against its range join, the as-of join against its ``ASOF
LEFT JOIN``. Join keys are drawn from values engines tend to get
wrong: NaN and signed zeros, infinities, empty and non-ASCII strings, extreme integers, timestamps
before the epoch, decimals, booleans and dates, and nulls (which match nothing); the table join's
rows carry a string, a list or a struct; a Delta feed's updates move rows to other primary keys."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import tempfile
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.testing import LocalJoins, rows_of, view_rows
from streamjoin.testing.interval import join_key

UTC = dt.timezone.utc
BASE = dt.datetime(2021, 1, 1, tzinfo=UTC)
#: The store backends, and the arranged store with its files in LMDB (``host="lmdb"``).
STORES = ("memory", "rocksdb", "lmdb", "arranged", "rocksdb-kv", "lmdb-kv")
#: A third of the profile's examples a test (each example is a whole run of a join).
EXAMPLES = settings(max_examples=max(10, settings().max_examples // 3))
#: Join-key values per type (None: a null key).
KEYS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "float": (pa.float64(), [0.0, -0.0, math.nan, 1.5, -1.5, math.inf, None]),
    "string": (pa.string(), ["", "a", "A", "é", "e\u0301", "z" * 40, "\x00", None]),
    "int": (pa.int64(), [0, -1, 1, 2**62, -2**63, None]),
    "timestamp": (pa.timestamp("us"), [dt.datetime(2020, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, 999999), None]),
    "decimal": (pa.decimal128(7, 2), [decimal.Decimal("0.00"), decimal.Decimal("1.10"), decimal.Decimal("-99999.99"),
                                      None]),
    "bool": (pa.bool_(), [True, False, None]),
    "date": (pa.date32(), [dt.date(2020, 1, 1), dt.date(1900, 2, 28), None]),
}


def _batches(draw: Any, table: pa.Table, count: int) -> list[pa.Table]:
    cuts = sorted(draw(st.lists(st.integers(0, table.num_rows), max_size=count - 1)))
    return [table.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, table.num_rows])]


def _settings(draw: Any) -> dict[str, Any]:
    """A run's store and partition count."""
    return {"store": draw(st.sampled_from(STORES)), "partitions": draw(st.integers(1, 4))}


#: A join's ``how`` in SQL.
_SQL = {"inner": "INNER", "left": "LEFT", "right": "RIGHT", "full": "FULL"}


def _paired(left: list[pa.Table], right: list[pa.Table]) -> list[tuple[pa.Table, pa.Table]]:
    n = max(len(left), len(right))
    return [(left[i] if i < len(left) else left[0].slice(0, 0), right[i] if i < len(right) else right[0].slice(0, 0))
            for i in range(n)]


def _streamed(case: dict[str, Any], call: Any) -> pa.Table:
    """``call(joins, *inputs)`` over the case's micro-batches in one in-process run; its output."""
    with tempfile.TemporaryDirectory() as root:
        joins = LocalJoins(root, partitions=case["partitions"], store=case["store"])
        outs = []
        for version, inputs in enumerate(case["batches"]):
            joins.begin(version, final=version == len(case["batches"]) - 1)
            outs.append(call(joins, *inputs))
    return pa.concat_tables(outs)


def _duckdb(sql: str, **tables: pa.Table) -> pa.Table:
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)
    return con.sql(sql).to_arrow_table()


#: The orders' payload column ``v``: a string, or a list or struct a row keeps as bytes.
PAYLOADS: dict[str, tuple[pa.DataType, list[Any]]] = {
    "string": (pa.string(), ["x", "y", None]),
    "list": (pa.list_(pa.string()), [["x", None], [], None]),
    "struct": (pa.struct([("n", pa.int32()), ("tags", pa.list_(pa.string()))]),
               [{"n": 1, "tags": ["x"]}, {"n": None, "tags": None}, None]),
}


@st.composite
def table_cases(draw: Any) -> dict[str, Any]:
    """Two plain change streams (orders keyed by ``id``, joined on ``k`` to customers keyed by
    ``cid``), each change at its own time, in micro-batches; with the run's settings."""
    kind = draw(st.sampled_from(sorted(KEYS)))
    key_type, pool = KEYS[kind]
    payload_type, payloads = PAYLOADS[draw(st.sampled_from(sorted(PAYLOADS)))]
    count = draw(st.integers(1, 30))
    times = draw(st.permutations(range(count)))
    left, right = [], []
    for t in times:
        at = BASE + dt.timedelta(seconds=t)
        op = draw(st.sampled_from(["upsert", "upsert", "delete"]))
        if draw(st.booleans()):
            left.append({"id": draw(st.integers(0, 6)), "k": draw(st.sampled_from(pool)),
                         "v": draw(st.sampled_from(payloads)), "op": op, "at": at})
        else:
            right.append({"cid": draw(st.sampled_from([p for p in pool if p is not None])),
                          "name": draw(st.sampled_from(["n1", "n2", None])), "op": op, "at": at})
    schemas = (pa.schema([("id", pa.int64()), ("k", key_type), ("v", payload_type), ("op", pa.string()),
                          ("at", pa.timestamp("us", "UTC"))]),
               pa.schema([("cid", key_type), ("name", pa.string()), ("op", pa.string()),
                          ("at", pa.timestamp("us", "UTC"))]))
    tables = [pa.Table.from_pylist(rows, schema) for rows, schema in zip((left, right), schemas)]
    batches = draw(st.integers(1, 4))
    return {"left": tables[0], "right": tables[1], "how": draw(st.sampled_from(["inner", "left", "full"])),
            **_settings(draw),
            "batches": _paired(_batches(draw, tables[0], batches), _batches(draw, tables[1], batches))}


def _final(changes: pa.Table, key: str) -> pa.Table:
    """The table a plain change stream leaves (each key's latest change by time; deletes remove),
    keys compared as SQL does (NaN one value, -0.0 equal to 0.0) and as the join does."""
    rows: dict[Any, dict] = {}
    for row in sorted(changes.to_pylist(), key=lambda r: r["at"]):
        ident = join_key(row[key])
        if row["op"] == "delete":
            rows.pop(ident, None)
        else:
            rows[ident] = row
    return pa.Table.from_pylist(list(rows.values()), changes.schema).drop(["op", "at"])


@EXAMPLES
@given(table_cases())
def test_table_table_join_view_equals_duckdbs_join_of_the_final_tables(case: dict[str, Any]) -> None:
    changes = _streamed(case, lambda joins, left, right: joins.table_table_join(
        left, right, (["k"], ["cid"]), left_key="id", right_key="cid", how=case["how"], left_time="at",
        right_time="at", store=case["store"]))
    _assert_view_is_duckdbs_join(changes, _final(case["left"], "id"), _final(case["right"], "cid"), case["how"])


def _assert_view_is_duckdbs_join(changes: pa.Table, left: pa.Table, right: pa.Table, how: str) -> None:
    """The view of the orders-customers join's ``changes`` is DuckDB's join of the final tables."""
    view = view_rows(changes, left_key="id", right_key="cid")
    expected = _duckdb(f"SELECT l.id, l.k, l.v, r.cid, r.name FROM l {_SQL[how]} JOIN r ON l.k = r.cid",
                       l=left, r=right)
    columns = ["id", "k", "v", "cid", "name"]
    assert rows_of(view.select(columns)) == rows_of(expected.select(columns))


@st.composite
def delta_cases(draw: Any) -> dict[str, Any]:
    """Orders as a Delta change feed written by statements, one commit each, in commit order:
    inserts, updates (the pre- and post-image of one id), updates that move an order to another id
    (the pre-image of the old id, the post-image of the new one), deletes; customers as plain
    changes; both cut into micro-batches anywhere (a commit's two images may fall in two). The
    orders' final table is the statements' own (``final``), not read back from the feed."""
    key_type, pool = KEYS[draw(st.sampled_from(sorted(KEYS)))]
    live: dict[int, dict] = {}
    feed, customers = [], []
    for version in range(draw(st.integers(1, 24))):
        at = BASE + dt.timedelta(seconds=version)
        meta = {"_commit_version": version, "_commit_timestamp": at}
        statement = draw(st.sampled_from(["insert", "update", "move", "delete", "customer"]))
        free = [i for i in range(8) if i not in live]
        if statement == "customer" or (statement != "insert" and not live) or (statement in ("insert", "move")
                                                                                 and not free):
            customers.append({"cid": draw(st.sampled_from([p for p in pool if p is not None])),
                              "name": draw(st.sampled_from(["n1", "n2", None])),
                              "op": draw(st.sampled_from(["upsert", "upsert", "delete"])), "at": at})
            continue
        if statement == "insert":
            row = {"id": draw(st.sampled_from(free)), "k": draw(st.sampled_from(pool)), "v": draw(st.sampled_from(["x", "y"]))}
            live[row["id"]] = row
            feed.append({**row, "_change_type": "insert", **meta})
            continue
        old = live[draw(st.sampled_from(sorted(live)))]
        if statement == "delete":
            del live[old["id"]]
            feed.append({**old, "_change_type": "delete", **meta})
            continue
        new = {**old, "k": draw(st.sampled_from(pool)), "v": draw(st.sampled_from(["x", "y", None]))}
        if statement == "move":
            new["id"] = draw(st.sampled_from(free))
            del live[old["id"]]
        live[new["id"]] = new
        images = [{**old, "_change_type": "update_preimage", **meta}, {**new, "_change_type": "update_postimage", **meta}]
        feed += draw(st.permutations(images))
    orders = pa.Table.from_pylist(feed, pa.schema([("id", pa.int64()), ("k", key_type), ("v", pa.string()),
                                                  ("_change_type", pa.string()), ("_commit_version", pa.int64()),
                                                  ("_commit_timestamp", pa.timestamp("us", "UTC"))]))
    customers_table = pa.Table.from_pylist(customers, pa.schema([("cid", key_type), ("name", pa.string()),
                                                                 ("op", pa.string()),
                                                                 ("at", pa.timestamp("us", "UTC"))]))
    final = pa.Table.from_pylist(list(live.values()), orders.schema.remove(5).remove(4).remove(3))
    batches = draw(st.integers(1, 4))
    return {"orders": orders, "customers": customers_table, "final": final,
            "how": draw(st.sampled_from(["inner", "left", "full"])), **_settings(draw),
            "batches": _paired(_batches(draw, orders, batches), _batches(draw, customers_table, batches))}


@EXAMPLES
@given(delta_cases())
def test_table_table_join_view_of_a_delta_feed_with_moved_keys_equals_duckdbs_join(case: dict[str, Any]) -> None:
    changes = _streamed(case, lambda joins, orders, customers: joins.table_table_join(
        orders, customers, (["k"], ["cid"]), left_key="id", right_key="cid", how=case["how"], right_time="at",
        store=case["store"]))
    _assert_view_is_duckdbs_join(changes, case["final"], _final(case["customers"], "cid"), case["how"])


@st.composite
def chain_cases(draw: Any) -> dict[str, Any]:
    """Three plain change streams: orders keyed by ``id`` referencing a customer (``k``) and a
    product (``p``), customers keyed by ``cid``, products by ``pid`` (each key of its own drawn
    type), each change at its own time, in micro-batches; each join's ``how``, and the run's
    settings."""
    (ck_type, c_pool), (pk_type, p_pool) = (KEYS[draw(st.sampled_from(sorted(KEYS)))] for _ in range(2))
    count = draw(st.integers(1, 36))
    times = draw(st.permutations(range(count)))
    rows: dict[str, list[dict]] = {"orders": [], "customers": [], "products": []}
    for t in times:
        at = BASE + dt.timedelta(seconds=t)
        op = draw(st.sampled_from(["upsert", "upsert", "delete"]))
        table = draw(st.sampled_from(sorted(rows)))
        if table == "orders":
            row = {"id": draw(st.integers(0, 6)), "k": draw(st.sampled_from(c_pool)), "p": draw(st.sampled_from(p_pool)),
                   "v": draw(st.sampled_from(["x", "y", None]))}
        elif table == "customers":
            row = {"cid": draw(st.sampled_from([c for c in c_pool if c is not None])),
                   "name": draw(st.sampled_from(["n1", "n2", None]))}
        else:
            row = {"pid": draw(st.sampled_from([p for p in p_pool if p is not None])),
                   "title": draw(st.sampled_from(["t1", "t2", None]))}
        rows[table].append({**row, "op": op, "at": at})
    change = [("op", pa.string()), ("at", pa.timestamp("us", "UTC"))]
    schemas = {"orders": pa.schema([("id", pa.int64()), ("k", ck_type), ("p", pk_type), ("v", pa.string()), *change]),
               "customers": pa.schema([("cid", ck_type), ("name", pa.string()), *change]),
               "products": pa.schema([("pid", pk_type), ("title", pa.string()), *change])}
    tables = {name: pa.Table.from_pylist(rows[name], schemas[name]) for name in rows}
    batches = draw(st.integers(1, 4))
    split = [_batches(draw, tables[name], batches) for name in ("orders", "customers", "products")]
    n = max(len(parts) for parts in split)
    return {**tables, "first": draw(st.sampled_from(["inner", "left", "full"])),
            "second": draw(st.sampled_from(["inner", "left", "full"])),
            **_settings(draw),
            "batches": [tuple(parts[i] if i < len(parts) else parts[0].slice(0, 0) for parts in split)
                        for i in range(n)]}


@EXAMPLES
@given(chain_cases())
def test_table_table_join_chain_view_equals_duckdbs_three_way_join_of_the_final_tables(case: dict[str, Any]) -> None:
    def chain(joins: LocalJoins, orders: pa.Table, customers: pa.Table, products: pa.Table) -> pa.Table:
        first = joins.table_table_join(orders, customers, (["k"], ["cid"]), left_key="id", right_key="cid",
                                       how=case["first"], left_time="at", right_time="at", store=case["store"])
        # (the first view's key: both primary keys, as a full join pads either side)
        return joins.table_table_join(first, products, (["p"], ["pid"]), left_key=["id", "cid"], right_key="pid",
                                      how=case["second"], right_time="at", store=case["store"])

    view = view_rows(_streamed(case, chain), left_key=["id", "cid"], right_key="pid")
    expected = _duckdb(f"SELECT o.id, o.k, o.p, o.v, c.cid, c.name, p.pid, p.title "
                       f"FROM (o {_SQL[case['first']]} JOIN c ON o.k = c.cid) "
                       f"{_SQL[case['second']]} JOIN p ON o.p = p.pid",
                       o=_final(case["orders"], "id"), c=_final(case["customers"], "cid"),
                       p=_final(case["products"], "pid"))
    columns = ["id", "k", "p", "v", "cid", "name", "pid", "title"]
    assert rows_of(view.select(columns)) == rows_of(expected.select(columns))


@st.composite
def interval_cases(draw: Any) -> dict[str, Any]:
    """Two event streams (each row at a time within a minute) with bounds, in micro-batches."""
    kind = draw(st.sampled_from(["float", "string", "int", "bool", "date"]))
    key_type, pool = KEYS[kind]

    def events(tag: str) -> pa.Table:
        rows = [{"k": draw(st.sampled_from(pool)), "ts": BASE + dt.timedelta(seconds=draw(st.integers(0, 60))),
                 tag: f"{tag}{i}"} for i in range(draw(st.integers(0, 20)))]
        schema = pa.schema([("k", key_type), ("ts", pa.timestamp("us", "UTC")), (tag, pa.string())])
        return pa.Table.from_pylist(sorted(rows, key=lambda r: r["ts"]), schema)
    left, right = events("a"), events("b")
    batches = draw(st.integers(1, 4))
    return {"left": left, "right": right, "lower": draw(st.integers(-10, 0)), "upper": draw(st.integers(0, 10)),
            "how": draw(st.sampled_from(["inner", "left", "right", "full"])), **_settings(draw),
            "batches": _paired(_batches(draw, left, batches), _batches(draw, right, batches))}


@EXAMPLES
@given(interval_cases())
def test_interval_join_equals_duckdbs_range_join(case: dict[str, Any]) -> None:
    got = _streamed(case, lambda joins, left, right: joins.interval_join(
        left, right, "k", left_time="ts", right_time="ts", lower=dt.timedelta(seconds=case["lower"]),
        upper=dt.timedelta(seconds=case["upper"]), delay=dt.timedelta(minutes=2), how=case["how"],
        store=case["store"]))
    expected = _duckdb(f"SELECT l.a, r.b FROM l {_SQL[case['how']]} JOIN r ON l.k = r.k "
                       f"AND r.ts >= l.ts + INTERVAL ({case['lower']}) SECOND "
                       f"AND r.ts <= l.ts + INTERVAL ({case['upper']}) SECOND", l=case["left"], r=case["right"])
    assert rows_of(got.select(["a", "b"])) == rows_of(expected)


@st.composite
def as_of_cases(draw: Any) -> dict[str, Any]:
    """Events and a plain change stream of the table (each change at its own time), in micro-batches."""
    kind = draw(st.sampled_from(["string", "int", "bool"]))
    key_type, pool = KEYS[kind]
    keys = [p for p in pool if p is not None]
    times = draw(st.lists(st.integers(0, 100), unique=True, max_size=20))
    changes = pa.Table.from_pylist(
        [{"k": draw(st.sampled_from(keys)), "op": draw(st.sampled_from(["upsert", "upsert", "delete"])),
          "at": BASE + dt.timedelta(seconds=t), "v": f"v{t}"} for t in sorted(times)],
        pa.schema([("k", key_type), ("op", pa.string()), ("at", pa.timestamp("us", "UTC")), ("v", pa.string())]))
    rows = [{"k": draw(st.sampled_from(pool)), "ts": BASE + dt.timedelta(seconds=draw(st.integers(0, 100)) + 0.5),
             "e": f"e{i}"} for i in range(draw(st.integers(0, 20)))]
    events = pa.Table.from_pylist(sorted(rows, key=lambda r: r["ts"]),
                                  pa.schema([("k", key_type), ("ts", pa.timestamp("us", "UTC")), ("e", pa.string())]))
    batches = draw(st.integers(1, 4))
    return {"events": events, "changes": changes, "how": draw(st.sampled_from(["left", "inner"])),
            **_settings(draw),
            "batches": _paired(_batches(draw, events, batches), _batches(draw, changes, batches))}


@EXAMPLES
@given(as_of_cases())
def test_as_of_join_equals_duckdbs_asof_join(case: dict[str, Any]) -> None:
    got = _streamed(case, lambda joins, events, changes: joins.stream_table_join(
        events, changes, "k", stream_time="ts", table_key="k", table_time="at", how=case["how"], mode="as_of",
        delay=dt.timedelta(minutes=5), store=case["store"]))
    # each change starts a version of its key's row; a delete's version has no row
    expected = _duckdb("SELECT e.e, CASE WHEN c.op = 'delete' THEN NULL ELSE c.v END AS v "
                       "FROM e ASOF LEFT JOIN c ON e.k = c.k AND e.ts >= c.at", e=case["events"], c=case["changes"])
    if case["how"] == "inner":   # an event whose key has no row then is left out
        expected = expected.filter(pc.is_valid(expected.column("v")))
    assert rows_of(got.select(["e", "v"])) == rows_of(expected)
