"""Scenarios of views over three tables (orders x customers x products), and ``ChainRun``: a chain
of two table-table joins driven in process, the first one's output fed as it comes to the second.

A :class:`ChainCase` is a random change history of the three tables: inserts, updates (that may
move an order to another customer or product, a foreign-key move), deletes, primary-key changes
(a delete of one key and an insert of the same row under another, in one batch), with change
times drawn independently of the batch (so some changes are stale); ``how`` of each join. The
reference is the relational three-way join of the tables as they stand after each batch
(:func:`reference_chain`).
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from streamjoin.statestore import destroy_store, open_store
from streamjoin.table.operator import TableTableJoin
from streamjoin.testing.table import Change, ReferenceTable, reference_view
from streamjoin.view import MaterializedView
from tests.joins.drivers import InProcess, StepChain
from tests.joins.table.cases import output_rows

SECOND = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)

ORDERS = pa.schema([("order_id", pa.int64()), ("cust", pa.int64()), ("prod", pa.string()), ("qty", pa.int64()),
                    ("op", pa.string()), ("o_at", pa.timestamp("us"))])
CUSTOMERS = pa.schema([("customer_id", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                       ("c_at", pa.timestamp("us"))])
PRODUCTS = pa.schema([("product_id", pa.string()), ("title", pa.string()), ("op", pa.string()),
                      ("p_at", pa.timestamp("us"))])


@dataclass(frozen=True)
class Table:
    """One of the three tables: schema, key, time column, and the values its changes draw from."""

    name: str
    schema: pa.Schema
    key: str
    time: str
    pks: tuple
    values: dict[str, tuple]

    @property
    def columns(self) -> tuple[str, ...]:
        return tuple(n for n in self.schema.names if n != "op")


TABLES = (
    Table("orders", ORDERS, "order_id", "o_at", (1, 2, 3, 4),
          {"cust": (10, 11, 12, None), "prod": ("a", "b", "c"), "qty": (1, 2)}),
    Table("customers", CUSTOMERS, "customer_id", "c_at", (10, 11, 12, 13), {"name": ("ann", "bob", None)}),
    Table("products", PRODUCTS, "product_id", "p_at", ("a", "b", "c", "d"), {"title": ("pen", "ink")}),
)
ORDERS_T, CUSTOMERS_T, PRODUCTS_T = TABLES
HOWS = ("inner", "left", "full")
#: The first join's view key: the second join's left key.
VIEW_KEY = ("order_id", "customer_id")


def when(seconds: int) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


# a change: (pk, op, second, values) with op "upsert" or "delete"
Abstract = tuple[Any, str, int, dict]


@dataclass
class ChainCase:
    """A random scenario: per batch, the changes of each table; ``how`` of both joins."""

    how: tuple[str, str]
    batches: list[tuple[list[Abstract], list[Abstract], list[Abstract]]]
    partitions: tuple[int, int]
    flip: bool = False               # the first view is the second join's right side
    fuse: bool = False               # TableTableJoin(fuse_key_stages=...) of both joins
    reference: list[ReferenceTable] = field(default_factory=list)

    def first(self) -> TableTableJoin:
        return TableTableJoin(ORDERS, CUSTOMERS, (["cust"], ["customer_id"]), left_key="order_id",
                              right_key="customer_id", how=self.how[0], left_time="o_at", right_time="c_at",
                              fuse_key_stages=self.fuse)

    def second(self, first: TableTableJoin) -> TableTableJoin:
        """The next join reads the first one's output as it comes (no format, no time given)."""
        if self.flip:
            return TableTableJoin(PRODUCTS, first.output_schema, (["product_id"], ["prod"]), left_key="product_id",
                                  right_key=list(VIEW_KEY), how=self.how[1], left_time="p_at",
                                  fuse_key_stages=self.fuse)
        return TableTableJoin(first.output_schema, PRODUCTS, (["prod"], ["product_id"]), left_key=list(VIEW_KEY),
                              right_key="product_id", how=self.how[1], right_time="p_at", fuse_key_stages=self.fuse)

    def tables(self, index: int) -> list[pa.Table]:
        out = []
        for table, changes in zip(TABLES, self.batches[index]):
            rows = [{table.key: pk, **values, "op": op, table.time: when(second)} for pk, op, second, values in changes]
            out.append(pa.Table.from_pylist(rows, schema=table.schema))
        return out

    def expected(self) -> list[tuple[Counter, Counter]]:
        """Per batch: the first view's rows and the three-table view's rows after it."""
        self.reference = [ReferenceTable((t.key,)) for t in TABLES]
        out = []
        for batch in self.batches:
            for table, reference, changes in zip(TABLES, self.reference, batch):
                reference.apply([Change((pk,), op, second * SECOND, None,
                                        {table.key: pk, **values, table.time: when(second)} if op == "upsert" else None)
                                 for pk, op, second, values in changes])
            first, three = reference_chain(*(r.rows for r in self.reference), self.how, self.flip)
            out.append((Counter(first.values()), Counter(three.values())))
        return out


def reference_chain(orders: dict, customers: dict, products: dict, how: tuple[str, str],
                    flip: bool = False) -> tuple[dict, dict]:
    """The relational joins of the tables as they stand: orders x customers, and that x products
    (``flip``: products x that), view key -> row tuple in the views' column order."""
    first = reference_view(orders, customers, left_on=("cust",), right_on=("customer_id",), how=how[0],
                           left_columns=ORDERS_T.columns, right_columns=CUSTOMERS_T.columns)
    columns = ORDERS_T.columns + CUSTOMERS_T.columns
    rows = {key: dict(zip(columns, row)) for key, row in first.items()}
    if flip:
        return first, reference_view(products, rows, left_on=("product_id",), right_on=("prod",), how=how[1],
                                     left_columns=PRODUCTS_T.columns, right_columns=columns)
    three = reference_view(rows, products, left_on=("prod",), right_on=("product_id",), how=how[1],
                           left_columns=columns, right_columns=PRODUCTS_T.columns)
    return first, three


@st.composite
def chain_cases(draw, *, max_changes: int = 8, max_batches: int = 4, max_partitions: int = 3) -> ChainCase:
    """A random :class:`ChainCase` (see module docstring)."""
    n = draw(st.integers(2, max_batches))
    batches: list[tuple[list, list, list]] = [([], [], []) for _ in range(n)]
    for i, table in enumerate(TABLES):
        for _ in range(draw(st.integers(1, max_changes))):
            at = draw(st.integers(0, n - 1))
            pk = draw(st.sampled_from(table.pks))
            second = draw(st.integers(0, 8))
            values = {c: draw(st.sampled_from(v)) for c, v in table.values.items()}
            kind = draw(st.sampled_from(["upsert", "upsert", "upsert", "delete", "move_key"]))
            if kind == "move_key":   # a primary-key change: the row leaves one key and appears under another
                other = draw(st.sampled_from([p for p in table.pks if p != pk]))
                batches[at][i].extend([(pk, "delete", second, {}), (other, "upsert", second, values)])
            else:
                batches[at][i].append((pk, kind, second, values if kind == "upsert" else {}))
    how = (draw(st.sampled_from(HOWS)), draw(st.sampled_from(HOWS)))
    partitions = (draw(st.integers(1, max_partitions)), draw(st.integers(1, max_partitions)))
    return ChainCase(how, batches, partitions, draw(st.booleans()), draw(st.booleans()))


_VIEWS = itertools.count()


class ChainRun:
    """A case's two joins driven in process, the first's output of a version fed to the second in
    the same version, and a view of each (:class:`MaterializedView`). ``runtime``: through the
    in-process runner (:class:`InProcess`, so local state can be lost), else the stages' steps."""

    def __init__(self, case: ChainCase, runtime: bool = False) -> None:
        self.case = case
        self.first = case.first()
        self.second = case.second(self.first)
        self.outputs: dict[int, pa.Table] = {}
        drive = InProcess if runtime else StepChain
        self.drivers: list[Any] = [
            drive(self.first, lambda i: case.tables(i)[:2], partitions=case.partitions[0]),
            drive(self.second, self._second_inputs, partitions=case.partitions[1])]
        self.paths = [f"sj-chain-view-{next(_VIEWS)}" for _ in range(2)]
        self.views = [MaterializedView(open_store("memory", path), *join.view_key, join.output_schema)
                      for path, join in zip(self.paths, (self.first, self.second))]

    def _second_inputs(self, index: int) -> list[pa.Table]:
        inputs = [self.outputs[index], self.case.tables(index)[2]]
        return inputs[::-1] if self.case.flip else inputs

    def run(self, index: int, version: int | None = None) -> tuple[pa.Table, pa.Table]:
        """Run batch ``index`` through both joins (as ``version`` again, or the next); apply the outputs."""
        self.outputs[index] = first = self.drivers[0].run(index, version=version)
        second = self.drivers[1].run(index, version=version)
        for view, out in zip(self.views, (first, second)):
            view.apply(out)
        return first, second

    def view_rows(self) -> tuple[Counter, Counter]:
        return output_rows(self.views[0].rows()), output_rows(self.views[1].rows())

    def close(self) -> None:
        for view, path in zip(self.views, self.paths):
            view.store.close()
            destroy_store("memory", path)
        for driver in self.drivers:
            driver.close()
