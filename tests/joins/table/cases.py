"""Scenarios of the table-table join tests, and ``Run``: a scenario driven in process with its view.

A :class:`TableCase` is a random change history of two tables (one of seven schema variants),
split into micro-batches, with a partition count and ``how``. Abstract changes are
``(pk, op, second, seq, jk, payload)`` tuples; the variant spells them as change-table rows and as
reference rows. Change times are drawn independently of the batch a change lands in, so changes
arrive out of order and some are stale; deletes of keys that have no row happen by chance, as do
updates that move a row to another join key (or to a null one).
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import pyarrow as pa
from hypothesis import strategies as st

from streamjoin.changes import ChangeFormat
from streamjoin.statestore import destroy_store, open_store
from streamjoin.table.operator import TableTableJoin
from streamjoin.table.spec import CHANGE_TIME
from streamjoin.testing.table import Change, ReferenceTable, reference_changes, reference_view
from streamjoin.view import MaterializedView
from tests.joins.drivers import InProcess, StepChain

SECOND = 1_000_000
EPOCH = dt.datetime(1970, 1, 1)
HOWS = ("inner", "left", "full")


def when(seconds: int, tz: bool = False) -> dt.datetime:
    value = EPOCH + dt.timedelta(seconds=seconds)
    return value.replace(tzinfo=dt.timezone.utc) if tz else value


@dataclass(frozen=True)
class Side:
    """One change table: its schema, how an abstract change is spelled, and the reference row."""

    schema: pa.Schema
    key: tuple[str, ...]
    row_columns: tuple[str, ...]
    pks: tuple
    jks: tuple
    seqs: tuple
    spell: Callable[[tuple, str, int, Any, tuple, Any], list[dict]]
    row: Callable[[tuple, int, Any, tuple, Any], dict]
    jk_of: Callable[[tuple], tuple] | None = None    # a join key fixed by the primary key (never moves)


@dataclass(frozen=True)
class Variant:
    left: Side
    right: Side
    on: Any
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    options: dict

    def join(self, how: str, **kept: Any) -> TableTableJoin:
        return TableTableJoin(self.left.schema, self.right.schema, self.on, left_key=self.left.key,
                              right_key=self.right.key, how=how, **self.options, **kept)


# -- SIMPLE: plain posts with a sequence column, keyed by an int; a Delta feed keyed by a string ----

def _simple_left_row(pk, second, seq, jk, payload):
    return {"id": pk[0], "k": jk[0], "v": payload, "at": when(second), "rev": seq}


def _simple_left_spell(pk, op, second, seq, jk, payload):
    return [{**_simple_left_row(pk, second, seq, jk, payload), "op": op}]


def _simple_right_row(pk, second, seq, jk, payload):
    return {"id": pk[0], "k": jk[0], "v": payload}


def _simple_right_spell(pk, op, second, seq, jk, payload):
    kind = {"upsert": "update_postimage" if payload == "q" else "insert", "delete": "delete",
            "heartbeat": "heartbeat"}[op]
    row = {**_simple_right_row(pk, second, seq, jk, payload), "_change_type": kind, "_commit_version": seq,
           "_commit_timestamp": when(second, True)}
    # a Delta update carries its pre-image too: the key stage skips it
    pre = [{**row, "v": "old", "k": 0, "_change_type": "update_preimage"}] if kind == "update_postimage" else []
    return pre + [row]


SIMPLE = Variant(
    Side(pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", pa.string()), ("op", pa.string()),
                    ("at", pa.timestamp("us")), ("rev", pa.int64())]),
         ("id",), ("id", "k", "v", "at", "rev"), ((0,), (1,), (2,)), ((0,), (1,), (1,), (None,)),
         (None, 0, 1), _simple_left_spell, _simple_left_row),
    Side(pa.schema([("id", pa.string()), ("k", pa.int32()), ("v", pa.string()), ("_change_type", pa.string()),
                    ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))]),
         ("id",), ("id", "k", "v"), (("a",), ("b",), ("c",)), ((0,), (1,), (1,), (None,)),
         (0, 1, 2), _simple_right_spell, _simple_right_row),
    "k", ("k",), ("k",),
    {"left_changes": ChangeFormat.plain("id", time="at", sequence="rev")},
)


# -- COMPOSITE: two-column primary and join keys, plain changes without a sequence ---------------

def _composite_left_row(pk, second, seq, jk, payload):
    return {"p": pk[0], "q": pk[1], "a": jk[0], "b": jk[1], "x": payload, "ts": when(second, True)}


def _composite_right_row(pk, second, seq, jk, payload):
    return {"r": pk[0], "c": jk[0], "d": jk[1], "y": payload, "ts": when(second, True)}


def _with_op(row_of):
    def spell(pk, op, second, seq, jk, payload):
        row = row_of(pk, second, seq, jk, payload)
        return [{**row, "op": op}]
    return spell


_JKS = ((0, "u"), (1, "u"), (1, "v"), (None, "u"), (1, "u"))
COMPOSITE = Variant(
    Side(pa.schema([("p", pa.int64()), ("q", pa.string()), ("a", pa.int64()), ("b", pa.string()),
                    ("x", pa.string()), ("op", pa.string()), ("ts", pa.timestamp("us", "UTC"))]),
         ("p", "q"), ("p", "q", "a", "b", "x", "ts"), ((0, "x"), (0, "y"), (1, "x")), _JKS, (None,),
         _with_op(_composite_left_row), _composite_left_row),
    Side(pa.schema([("r", pa.int64()), ("c", pa.int64()), ("d", pa.large_string()), ("y", pa.string()),
                    ("op", pa.string()), ("ts", pa.timestamp("us", "UTC"))]),
         ("r",), ("r", "c", "d", "y", "ts"), ((0,), (1,), (2,)), _JKS, (None,),
         _with_op(_composite_right_row), _composite_right_row),
    (["a", "b"], ["c", "d"]), ("a", "b"), ("c", "d"),
    {"left_time": "ts", "right_time": "ts"},
)


# -- KEYED: a foreign-key join whose right table's primary key is its join key; ONE_TO_ONE: both ----
# (their key stages can run inside the join stage: TableTableJoin(fuse_key_stages=True))

def _keyed_row(name):
    def row(pk, second, seq, jk, payload):
        return {name: pk[0], "w": payload, "at": when(second)}
    return row


_KEYED_RIGHT = Side(pa.schema([("k", pa.int64()), ("w", pa.string()), ("op", pa.string()), ("at", pa.timestamp("us"))]),
                    ("k",), ("k", "w", "at"), ((0,), (1,), (2,)), ((0,),), (None,),
                    _with_op(_keyed_row("k")), _keyed_row("k"))
KEYED = Variant(SIMPLE.left, _KEYED_RIGHT, "k", ("k",), ("k",),
                {"left_changes": ChangeFormat.plain("id", time="at", sequence="rev"), "right_time": "at"})
ONE_TO_ONE = Variant(
    Side(pa.schema([("k", pa.int32()), ("w", pa.string()), ("op", pa.string()), ("at", pa.timestamp("us"))]),
         ("k",), ("k", "w", "at"), ((0,), (1,), (3,)), ((0,),), (None,), _with_op(_keyed_row("k")), _keyed_row("k")),
    _KEYED_RIGHT, "k", ("k",), ("k",), {"left_time": "at", "right_time": "at"})


# -- LINES: order lines keyed by (order, line), joined on the order: the join key is part of the
# primary key, so no row moves and both key stages can run inside the join stage ------------------

def _line_row(pk, second, seq, jk, payload):
    return {"o": pk[0], "n": pk[1], "w": payload, "at": when(second)}


LINES = Variant(
    Side(pa.schema([("o", pa.int64()), ("n", pa.int32()), ("w", pa.string()), ("op", pa.string()),
                    ("at", pa.timestamp("us"))]),
         ("o", "n"), ("o", "n", "w", "at"), ((0, 0), (0, 1), (1, 0), (2, 0)), ((0,),), (None,),
         _with_op(_line_row), _line_row, jk_of=lambda pk: (pk[0],)),
    _KEYED_RIGHT, (["o"], ["k"]), ("o",), ("k",), {"left_time": "at", "right_time": "at"})


# -- IMMUTABLE: SIMPLE whose posts never change author, declared so (left_immutable_join_key) -------

_FIXED_JK = {(0,): (0,), (1,): (1,), (2,): (None,)}
IMMUTABLE = Variant(
    Side(SIMPLE.left.schema, SIMPLE.left.key, SIMPLE.left.row_columns, SIMPLE.left.pks, SIMPLE.left.jks,
         SIMPLE.left.seqs, SIMPLE.left.spell, SIMPLE.left.row, jk_of=_FIXED_JK.__getitem__),
    SIMPLE.right, "k", ("k",), ("k",), {**SIMPLE.options, "left_immutable_join_key": True})


# -- NESTED: SIMPLE's posts whose payload is a struct of a list, joined to KEYED's table whose payload
# is a map of lists: rows that hold lists, structs and maps (:mod:`streamjoin.kit.nested`) -------

_POST = pa.struct([("tags", pa.list_(pa.string())), ("n", pa.int32()), ("at", pa.timestamp("us")),
                   ("price", pa.decimal128(9, 2))])
_LINKS = pa.map_(pa.string(), pa.list_(pa.binary()))
_NESTED_POST = {"p": {"tags": ["p", None], "n": 1, "at": when(1), "price": decimal.Decimal("1.50")},
                "q": {"tags": [], "n": None, "at": None, "price": None}, None: None}
_NESTED_LINKS = {"p": [("p", [b"\x00", None]), ("", [])], "q": [], None: None}


def freeze(value: Any) -> Any:
    """``value`` (a Python value of an Arrow column) hashable: lists, map entries and struct
    fields as tuples, in their order."""
    if isinstance(value, dict):
        return tuple((name, freeze(v)) for name, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def _nested_left_row(pk, second, seq, jk, payload):
    return {**_simple_left_row(pk, second, seq, jk, None), "v": freeze(_NESTED_POST[payload])}


def _nested_left_spell(pk, op, second, seq, jk, payload):
    return [{**_simple_left_row(pk, second, seq, jk, None), "v": _NESTED_POST[payload], "op": op}]


def _nested_right_row(pk, second, seq, jk, payload):
    return {"k": pk[0], "w": freeze(_NESTED_LINKS[payload]), "at": when(second)}


def _nested_right_spell(pk, op, second, seq, jk, payload):
    return [{"k": pk[0], "w": _NESTED_LINKS[payload], "op": op, "at": when(second)}]


NESTED = Variant(
    Side(pa.schema([("id", pa.int64()), ("k", pa.int64()), ("v", _POST), ("op", pa.string()),
                    ("at", pa.timestamp("us")), ("rev", pa.int64())]),
         ("id",), ("id", "k", "v", "at", "rev"), ((0,), (1,), (2,)), ((0,), (1,), (1,), (None,)),
         (None, 0, 1), _nested_left_spell, _nested_left_row),
    Side(pa.schema([("k", pa.int64()), ("w", _LINKS), ("op", pa.string()), ("at", pa.timestamp("us"))]),
         ("k",), ("k", "w", "at"), ((0,), (1,), (2,)), ((0,),), (None,), _nested_right_spell, _nested_right_row),
    "k", ("k",), ("k",),
    {"left_changes": ChangeFormat.plain("id", time="at", sequence="rev"), "right_time": "at"})
VARIANTS = (SIMPLE, COMPOSITE, KEYED, ONE_TO_ONE, LINES, IMMUTABLE, NESTED)


@dataclass
class TableCase:
    """A random scenario: batches of abstract changes per side."""

    variant: Variant
    how: str
    batches: list[tuple[list[tuple], list[tuple]]]
    partitions: int
    retention: int | None = None     # seconds (None: keep every key)
    expire_rows: bool = False
    left_delay: int | None = None    # seconds (None: ``retention``)
    right_delay: int | None = None
    fuse: bool = False               # TableTableJoin(fuse_key_stages=...)
    rows_apart: tuple[str, ...] = ()  # TableTableJoin(rows_apart=...): a fused side's rows beside its keys

    def join(self) -> TableTableJoin:
        options = {name: dt.timedelta(seconds=value) for name, value in
                   (("retention", self.retention), ("left_delay", self.left_delay),
                    ("right_delay", self.right_delay)) if value is not None}
        return self.variant.join(self.how, expire_rows=self.expire_rows, fuse_key_stages=self.fuse,
                                 rows_apart=self.rows_apart, **options)

    def side_retentions(self) -> tuple[int | None, int | None]:
        """Each table's retention in µs: its delay, else ``retention`` (None: keep every key)."""
        left, right = (self.retention if d is None else d for d in (self.left_delay, self.right_delay))
        return (None if left is None else left * SECOND, None if right is None else right * SECOND)

    def tables(self, index: int) -> tuple[pa.Table, pa.Table]:
        out = []
        for side, changes in zip((self.variant.left, self.variant.right), self.batches[index]):
            rows = [r for c in changes for r in side.spell(*c)]
            out.append(pa.Table.from_pylist(rows, schema=side.schema))
        return out[0], out[1]

    def expected(self) -> list[tuple[Counter, Counter]]:
        """Per batch: (the view's rows after it, its change stream), from the reference."""
        v = self.variant
        left_kept, right_kept = self.side_retentions()
        tables = (ReferenceTable(v.left.key, left_kept, self.expire_rows),
                  ReferenceTable(v.right.key, right_kept, self.expire_rows))
        view: dict = {}
        out = []
        for version, batch in enumerate(self.batches):
            for table, side, changes in zip(tables, (v.left, v.right), batch):
                table.apply([Change(pk, op, s * SECOND, seq, side.row(pk, s, seq, jk, payload) if op == "upsert" else None)
                             for pk, op, s, seq, jk, payload in changes if op != "heartbeat"],
                            [s * SECOND for _, op, s, *_ in changes if op == "heartbeat"])
            after = reference_view(tables[0].rows, tables[1].rows, left_on=v.left_on, right_on=v.right_on,
                                   how=self.how, left_columns=v.left.row_columns, right_columns=v.right.row_columns)
            changes = moves_as_retract_and_insert(reference_changes(view, after, version), self.join_key)
            out.append((Counter(after.values()), Counter(changes)))
            view = after
        self.reference = tables
        return out

    def join_key(self, row: tuple) -> tuple:
        """The join key of an output row: its left row's, or its right row's if the left is padded."""
        v = self.variant
        width = len(v.left.row_columns)
        left = [row[v.left.row_columns.index(c)] for c in v.left_on]
        right = [row[width + v.right.row_columns.index(c)] for c in v.right_on]
        padded = all(row[v.left.row_columns.index(k)] is None for k in v.left.key)
        return tuple(right if padded else left)


def moves_as_retract_and_insert(changes: Sequence[tuple], join_key: Callable[[tuple], tuple]) -> list[tuple]:
    """The reference diff as the operator spells it: an update whose row changes join key is a
    delete (at the old key's partition) and an insert (at the new one's)."""
    out = list(changes)
    pres = {i for i, c in enumerate(out) if c[-3] == "update_preimage"}
    for i in sorted(pres):
        pre, post = out[i], out[i + 1]
        assert post[-3] == "update_postimage"
        if join_key(pre[:-3]) != join_key(post[:-3]):
            out[i], out[i + 1] = (*pre[:-3], "delete", *pre[-2:]), (*post[:-3], "insert", *post[-2:])
    return out


# -- strategies ----------------------------------------------------------------------------------

def _changes(draw, side: Side, n_batches: int, max_changes: int) -> list[list[tuple]]:
    batches: list[list[tuple]] = [[] for _ in range(n_batches)]
    for _ in range(draw(st.integers(min(3, max_changes), max_changes))):
        op = draw(st.sampled_from(["upsert", "upsert", "upsert", "delete", "heartbeat"]))
        pk = draw(st.sampled_from(side.pks))
        jk = side.jk_of(pk) if side.jk_of is not None else draw(st.sampled_from(side.jks))
        change = (pk, op, draw(st.integers(0, 6)), draw(st.sampled_from(side.seqs)), jk,
                  draw(st.sampled_from(["p", "q", None])))
        batches[draw(st.integers(0, n_batches - 1))].append(change)
    return batches


@st.composite
def table_cases(draw, *, max_changes: int = 10, max_partitions: int = 3, max_batches: int = 5) -> TableCase:
    """A random :class:`TableCase`."""
    variant = draw(st.sampled_from(VARIANTS))
    n = draw(st.integers(min(2, max_batches), max_batches))
    left = _changes(draw, variant.left, n, max_changes)
    right = _changes(draw, variant.right, n, max_changes)
    retention = draw(st.sampled_from([None, None, 0, 1, 2, 3]))
    # per-table delays (None: ``retention``), sometimes
    left_delay, right_delay = draw(st.sampled_from([(None, None), (None, None), (0, None), (None, 2), (1, 3),
                                                    (3, 0)]))
    case = TableCase(variant, draw(st.sampled_from(HOWS)), list(zip(left, right)),
                     draw(st.integers(1, max_partitions)), retention, left_delay=left_delay, right_delay=right_delay)
    case.expire_rows = None not in case.side_retentions() and draw(st.booleans())
    case.fuse = draw(st.booleans())
    # a fused side keyed by its join key holds its rows in its key step's entries, or (a checkpoint
    # of the layout before) beside them
    case.rows_apart = draw(st.sampled_from([(), (), ("left",), ("right",), ("left", "right")])) if case.fuse else ()
    return case


# -- running -------------------------------------------------------------------------------------

def output_rows(table: pa.Table) -> Counter:
    """The rows of a join's output (or a view) without the change time (its tests are the chain's)."""
    if CHANGE_TIME in table.column_names:
        table = table.drop_columns([CHANGE_TIME])
    return Counter(tuple(freeze(v) for v in r.values()) for r in table.to_pylist())


_VIEWS = itertools.count()


class Run:
    """A case's join driven in process, and a view it maintains: by the in-process runner
    (``driver``, an :class:`InProcess`), or, with ``runtime`` False, by its stages' steps (a
    :class:`StepChain`)."""

    def __init__(self, case: TableCase, store: str = "memory", runtime: bool = True) -> None:
        self.case = case
        self.join = case.join()
        self.driver: InProcess | StepChain = (
            InProcess(self.join, case.tables, partitions=case.partitions, store=store) if runtime
            else StepChain(self.join, case.tables, partitions=case.partitions))
        self.view_path = f"sj-table-view-{next(_VIEWS)}"
        self.view = MaterializedView(open_store("memory", self.view_path), *self.join.view_key, self.join.output_schema)

    def run(self, index: int, version: int | None = None, apply: bool = True) -> pa.Table:
        """Run batch ``index``; apply its output to the view (unless ``apply`` is False)."""
        out = self.driver.run(index, version=version)
        if apply:
            self.view.apply(out)
        return out

    def view_rows(self) -> Counter:
        return output_rows(self.view.rows())

    def close(self) -> None:
        self.view.store.close()
        destroy_store("memory", self.view_path)
        self.driver.close()
