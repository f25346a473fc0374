"""State areas: the layouts' contracts, and that each operator writes the bytes it wrote before them.

The expected keys are written out literally: a change to them would make existing checkpoints
unreadable, so it must be a new layout version, never a side effect.
"""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment import state as enrichment
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.errors import JoinDefinitionError
from streamjoin.interval import state as interval
from streamjoin.interval.operator import IntervalJoin
from streamjoin.runtime.areas import INT, PACKED, TIMESTAMP, Area, Ints, StateLayout
from streamjoin.runtime.operator import StepInput
from streamjoin.statestore.memory import MemoryStore
from streamjoin.table import rekey, stage
from streamjoin.table.rekey import TableRekey
from streamjoin.table.stage import TableJoinStage

ZERO, ONE, TWO, THREE, FIVE, SEVEN, NINE = (b"\x80" + bytes(6) + bytes([n]) for n in (0, 1, 2, 3, 5, 7, 9))
MINUS_ONE, MINUS_TEN = b"\x7f" + b"\xff" * 7, b"\x7f" + b"\xff" * 6 + b"\xf6"
TS = pa.timestamp("us")


def ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


# -- the areas -------------------------------------------------------------------------------------

AREA = Area("events", b"E", (("time", TIMESTAMP), ("version", INT)))


def test_area_key_decodes_back_to_its_parts() -> None:
    key = AREA.key(-1, 2)
    assert key == b"E" + MINUS_ONE + TWO
    assert AREA.decode(key) == (-1, 2)
    assert AREA.decode(AREA.key(-1)) == (-1,)
    assert AREA.join(MINUS_ONE, TWO) == key and AREA.keys([MINUS_ONE + TWO]) == [key]
    assert key[AREA.offset("version")] == TWO


def test_area_decode_refuses_keys_of_another_area_or_shape() -> None:
    for bad in (b"T" + ONE, b"E" + ONE[:5], b"E" + ONE + TWO + b"x"):
        with pytest.raises(ValueError):
            AREA.decode(bad)
    with pytest.raises(ValueError):
        AREA.key(1, 2, 3)


def test_area_ranges_hold_exactly_their_keys() -> None:
    store = MemoryStore("areas-ranges")
    try:
        keys = [AREA.key(t, v) for t in (-1, 0, 1, 2) for v in (0, 1)]
        store.write([(k, b"") for k in keys] + [(b"D", b""), (b"F", b"")])
        assert [k for k, _ in AREA.scan(store)] == keys
        assert [k for k, _ in AREA.scan(store, 1)] == keys[4:6]
        assert [k for k, _ in AREA.scan_span(store, (0,), (1,))] == keys[2:6]
        assert [k for k, _ in AREA.scan_span(store, None, (0,))] == keys[:4]
        assert [k for k, _ in store.scan(*AREA.below(1))] == keys[:4]
        assert [k for k, _ in store.scan(*AREA.through(keys[3]))] == keys[:4]
        assert list(AREA.scan_under(store, AREA.key(2))) == [(ZERO, b""), (ONE, b"")]
    finally:
        store.close()


def test_area_get_and_put_use_the_value_codec() -> None:
    area = Area("meta", b"\x00meta", (), Ints(2))
    store = MemoryStore("areas-values")
    try:
        assert area.get(store) is None
        store.write([area.put((1, -1))])
        assert store.get(b"\x00meta") == ONE + MINUS_ONE
        assert area.get(store) == (1, -1)
    finally:
        store.close()


def test_state_layout_refuses_a_prefix_that_starts_another() -> None:
    with pytest.raises(JoinDefinitionError, match="starts the prefix"):
        StateLayout("clash", 1, (Area("a", b"T"), Area("b", b"Tx")))
    with pytest.raises(JoinDefinitionError, match="twice"):
        StateLayout("names", 1, (Area("a", b"A"), Area("a", b"B")))
    with pytest.raises(JoinDefinitionError):
        Area("empty", b"")
    with pytest.raises(JoinDefinitionError):
        Area("rest first", b"P", (("all", PACKED), ("then", INT)))


@pytest.mark.parametrize("layout", [interval.LAYOUT, enrichment.LAYOUT, stage.LAYOUT, rekey.LAYOUT])
def test_state_layout_places_every_key_in_one_area(layout: StateLayout) -> None:
    for area in layout.areas:
        assert layout.area_of(area.key()) is area
        assert layout[area.name] is area
    assert layout.area_of(b"\xfe") is None


# -- each operator writes the bytes of its documented layout -----------------------------------------

EVENTS = pa.schema([("k", pa.int64()), ("t", TS)])


def test_state_areas_interval_bytes_are_unchanged() -> None:
    assert interval.watermark_put(5) == (b"\x00watermark", FIVE)
    key, value = interval.marks_put("left", -10, 3, np.array([4, 2]))
    assert key == b"L" + MINUS_TEN + b"m" + THREE
    assert value == b"\x02" + bytes(7) + b"\x04" + bytes(7)
    table = pa.table({"k": [1, 2, 3]}, schema=pa.schema([("k", pa.int64())]))
    puts = interval.rows_puts("right", 0, 1, table, 2, None)
    assert [k for k, _ in puts] == [b"R" + ZERO + b"r" + ONE + b"\x00\x00\x00\x00",
                                    b"R" + ZERO + b"r" + ONE + b"\x00\x00\x00\x01"]
    assert [v for _, v in puts] == [ipc(table.slice(0, 2)), ipc(table.slice(2))]
    assert interval.eviction_range("left", 7) == (b"L", b"L" + SEVEN)
    assert interval.eviction_range("right", None) == (b"R", b"S")
    op = IntervalJoin(EVENTS, EVENTS, "k", left_time="t", right_time="t", lower=dt.timedelta(seconds=-1),
                      upper=dt.timedelta(seconds=1), delay=dt.timedelta(0))
    assert op.definition()["layout"] == interval.LAYOUT.version == 1


def test_state_areas_enrichment_bytes_are_unchanged() -> None:
    meta = enrichment.Meta(1, 2, 3, -1)
    assert enrichment.meta_put(meta) == (b"\x00meta", ONE + TWO + THREE + MINUS_ONE)
    assert enrichment.version_key(7) == b"T" + SEVEN
    assert enrichment.delta_key(7, 9) == b"T" + SEVEN + b"\x01" + NINE
    assert enrichment.delta_range(7) == (b"T" + SEVEN + b"\x01", b"T" + SEVEN + b"\x02")
    key = enrichment.event_key(-1, 2)
    assert key == b"E" + MINUS_ONE + TWO
    assert enrichment.event_start(key) == -1
    assert enrichment.waiting_through(key) == (b"E", key + b"\x00")
    table = pa.table({"k": [1, 2]})
    assert enrichment.blob(table) == ipc(table)
    store = MemoryStore("areas-enrichment")
    try:
        store.write([enrichment.meta_put(meta)])
        assert enrichment.read_meta(store) == meta
    finally:
        store.close()
    changes = pa.schema([("k", pa.int64()), ("at", TS), ("op", pa.string())])
    op = EnrichmentJoin(EVENTS, changes, "k", stream_time="t", changes=ChangeFormat.plain("k", time="at"), layout="buckets")
    assert op.definition()["layout"] == enrichment.LAYOUT.version == 2


POSTS = pa.schema([("post_id", pa.int64()), ("author", pa.string()), ("at", TS), ("op", pa.string())])
AUTHORS = pa.schema([("author", pa.string()), ("at", TS), ("op", pa.string()), ("n", pa.int64())])
ANN = b"@ann\x00\x00"  # pack("ann")


def _puts(result) -> list:
    """A step result's puts, given as lists or as columns."""
    return result.writes.as_lists()[0] if result.writes is not None else list(result.puts)


def test_state_areas_table_bytes_are_unchanged() -> None:
    left = TableRekey(POSTS, ChangeFormat.plain("post_id", time="at"), "author", "left")
    right = TableRekey(AUTHORS, ChangeFormat.plain("author", time="at"), "author", "right")
    join = TableJoinStage(left.side, right.side, "inner")
    stores = [MemoryStore(f"areas-table-{i}") for i in range(3)]
    try:
        posts = pa.table({"post_id": [7], "author": ["ann"], "at": pa.array([5], TS), "op": ["upsert"]}, schema=POSTS)
        authors = pa.table({"author": ["ann"], "at": pa.array([6], TS), "op": ["upsert"], "n": [3]}, schema=AUTHORS)
        routed_left = left.step(stores[0], StepInput(0, 0, (posts,), (None,)))
        routed_right = right.step(stores[1], StepInput(0, 0, (authors,), (None,)))
        # stage 1: b"K" | pack(primary key) -> pack(change time, sequence, has row, *join key)
        assert _puts(routed_left) == [(b"K\x10" + SEVEN, b"\x10" + FIVE + b"\x05\x09" + ANN)]
        assert _puts(routed_right) == [(b"K" + ANN, b"\x10" + b"\x80" + bytes(6) + b"\x06" + b"\x05\x09" + ANN)]
        routed_left.write_to(stores[0], None)
        assert rekey._held(stores[0].get(b"K\x10" + SEVEN)) == (5, None, True, ANN)
        # stage 2: side | pack(join key) | pack(primary key) -> pack(row); the held counts
        result = join.step(stores[2], StepInput(0, 0, (routed_left.output, routed_right.output), (None, None)))
        assert _puts(result) == [
            (b"\x00meta", b"\x10" + ONE + b"\x10" + ONE),
            (b"L" + ANN + b"\x10" + SEVEN, b"\x10" + SEVEN + ANN + b"\x10" + FIVE),
            (b"R" + ANN + ANN, ANN + b"\x10" + b"\x80" + bytes(6) + b"\x06" + b"\x10" + THREE),
        ]
        assert left.definition()["layout"] == rekey.LAYOUT.version == 2   # 2: the expiry index (retention)
        assert join.definition()["layout"] == stage.LAYOUT.version == 1
    finally:
        for store in stores:
            store.close()
