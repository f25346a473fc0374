"""Change-stream vocabularies (streamjoin.changes): every vocabulary normalises one history to the same
internal changes; bad rows are set aside with their reason and counted; bad formats are refused."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changes import (
    DELETE,
    HEARTBEAT,
    OP,
    PLAIN_COLUMNS,
    SEQ,
    TIME,
    UPSERT,
    ChangeFormat,
    normalise,
    to_plain,
)
from streamjoin.errors import JoinDefinitionError

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
ROW = pa.schema([("id", pa.int64()), ("name", pa.string())])
PLAIN = pa.schema([("id", pa.int64()), ("op", pa.string()), ("ts", pa.timestamp("us", "UTC")),
                   ("seq", pa.int64()), ("name", pa.string())])
DELTA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("_change_type", pa.string()),
                   ("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))])
DEBEZIUM = pa.schema([("op", pa.string()), ("before", pa.struct(ROW)), ("after", pa.struct(ROW)),
                      ("ts_ms", pa.int64()), ("lsn", pa.int64())])
FORMATS = {
    "plain": (ChangeFormat.plain("id", time="ts", sequence="seq"), PLAIN),
    "delta": (ChangeFormat.delta("id"), DELTA),
    "debezium": (ChangeFormat.debezium("id", sequence="lsn"), DEBEZIUM),
    "debezium_json": (ChangeFormat.debezium_json("id", ROW, sequence="lsn"), pa.schema([("value", pa.string())])),
}

# an abstract change: (key, op, time in ms, seq, name, variant draw)
changes_strategy = st.lists(st.tuples(
    st.integers(0, 3), st.sampled_from(["upsert", "delete", "heartbeat"]), st.integers(-10**6, 10**6),
    st.integers(0, 9), st.sampled_from(["ann", "bob", None]), st.integers(0, 2),
), max_size=12)


def _plain(c) -> list[dict]:
    key, op, ms, seq, name, variant = c
    op = {"upsert": ["upsert", "insert", "update"][variant]}.get(op, op)
    return [{"id": None if op == "heartbeat" else key, "op": op, "ts": EPOCH + dt.timedelta(milliseconds=ms),
             "seq": seq, "name": name}]


def _delta(c) -> list[dict]:
    key, op, ms, seq, name, variant = c
    kind = {"upsert": "insert" if variant == 0 else "update_postimage"}.get(op, op)
    row = {"id": None if op == "heartbeat" else key, "name": name, "_change_type": kind, "_commit_version": seq,
           "_commit_timestamp": EPOCH + dt.timedelta(milliseconds=ms)}
    return ([{**row, "name": "before", "_change_type": "update_preimage"}] if kind == "update_postimage" else []) + [row]


def _debezium(c) -> list[dict]:
    key, op, ms, seq, name, variant = c
    row = {"id": key, "name": name}
    if op == "heartbeat":
        return [{"op": "heartbeat", "before": None, "after": None, "ts_ms": ms, "lsn": seq}]
    if op == "delete":
        return [{"op": "d", "before": row, "after": None, "ts_ms": ms, "lsn": seq}]
    return [{"op": "cur"[variant], "before": {"id": key, "name": "old"} if variant == 1 else None, "after": row,
             "ts_ms": ms, "lsn": seq}]


def _debezium_json(c) -> list[dict]:
    envelope = _debezium(c)[0]
    text = json.dumps({"payload": envelope} if c[5] == 2 else envelope)
    return [{"value": text}] + ([{"value": None}] if envelope["op"] == "d" else [])   # + Kafka tombstone


BUILDERS = {"plain": _plain, "delta": _delta, "debezium": _debezium, "debezium_json": _debezium_json}


def _internal(name: str, changes) -> list[tuple]:
    fmt, schema = FORMATS[name]
    table = pa.Table.from_pylist([r for c in changes for r in BUILDERS[name](c)], schema=schema)
    result = normalise(table, fmt)
    assert result.aside.num_rows == 0
    out = result.changes.select(["id", OP, TIME, SEQ, "name"]).to_pylist()
    return [(r["id"], r[OP], r[TIME], r[SEQ], r["name"] if r[OP] == UPSERT else None) for r in out]


@given(changes=changes_strategy)
def test_changes_every_vocabulary_normalises_to_the_same_internal_changes(changes):
    codes = {"upsert": UPSERT, "delete": DELETE, "heartbeat": HEARTBEAT}
    expected = [(None if op == "heartbeat" else key, codes[op], ms * 1000, seq, name if op == "upsert" else None)
                for key, op, ms, seq, name, _ in changes]
    for name in FORMATS:
        assert _internal(name, changes) == expected, name


@given(changes=changes_strategy)
def test_changes_to_plain_round_trips_through_the_plain_vocabulary(changes):
    fmt, schema = FORMATS["debezium"]
    table = pa.Table.from_pylist([r for c in changes for r in _debezium(c)], schema=schema)
    first = normalise(table, fmt).changes
    again = normalise(to_plain(first, ["id"]), ChangeFormat.plain("id", **PLAIN_COLUMNS)).changes
    assert again.select(["id", OP, TIME, SEQ, "name"]).equals(first.select(["id", OP, TIME, SEQ, "name"]))


def test_changes_count_preimages_heartbeats_and_tombstones():
    delta = pa.Table.from_pylist([r for c in [(1, "upsert", 5, 1, "a", 1), (0, "heartbeat", 6, 2, None, 0)]
                                  for r in _delta(c)], schema=DELTA)
    counts = normalise(delta, FORMATS["delta"][0]).counts
    assert (counts["preimages"], counts["heartbeats"]) == (1, 1)
    texts = pa.table({"value": [None, json.dumps({"op": "c", "after": {"id": 1, "name": "a"}, "ts_ms": 1})]})
    result = normalise(texts, FORMATS["debezium_json"][0])
    assert (result.counts["tombstones"], result.changes.num_rows, result.aside.num_rows) == (1, 1, 0)


@pytest.mark.parametrize("name", ["plain", "delta", "debezium"])
def test_changes_bad_rows_are_set_aside_with_their_reason(name):
    fmt, schema = FORMATS[name]
    good = BUILDERS[name]((1, "upsert", 5, 1, "a", 0))[-1]
    op_column, time_column = fmt.op, fmt.time
    key_null = ({"after": {"id": None, "name": "a"}} if name == "debezium" else {"id": None})
    rows = [good, {**good, op_column: "truncate"}, {**good, op_column: None}, {**good, time_column: None},
            {**good, **key_null}]
    result = normalise(pa.Table.from_pylist(rows, schema=schema), fmt)
    assert result.changes.num_rows == 1
    assert result.aside.column("_reason").to_pylist() == ["unknown op", "unknown op", "null change time", "null key"]
    assert result.aside.schema.names == schema.names + ["_reason"]
    assert (result.counts["unknown_op"], result.counts["null_change_time"], result.counts["null_key"]) == (2, 1, 1)
    assert result.index.tolist() == [0]


def test_changes_json_envelopes_that_do_not_parse_or_fit_are_set_aside():
    texts = ["{not json", json.dumps([1, 2]), json.dumps({"op": "c", "after": {"id": "x"}, "ts_ms": 1}),
             json.dumps({"op": "c", "after": {"id": 1, "name": "a"}, "ts_ms": "soon"}),
             json.dumps({"op": "x", "after": {"id": 1, "name": "a"}, "ts_ms": 1}),
             json.dumps({"op": "c", "after": {"id": 2, "name": "b"}})]
    result = normalise(pa.table({"value": texts}), FORMATS["debezium_json"][0])
    assert result.changes.num_rows == 0
    assert sorted(result.aside.column("_reason").to_pylist()) == sorted(
        ["invalid json", "invalid json", "invalid row", "invalid row", "unknown op", "null change time"])


@pytest.mark.parametrize("fmt, schema, message", [
    (ChangeFormat.plain("id", time="ts"), PLAIN.remove(PLAIN.get_field_index("op")), "no column 'op'"),
    (ChangeFormat.plain("id", time="name"), PLAIN, "'name' must be a timestamp or integer"),
    (ChangeFormat.plain("nope", time="ts"), PLAIN, "no key column 'nope'"),
    (ChangeFormat.plain("id", time="ts", sequence="name"), PLAIN, "'name' must be an integer"),
    (ChangeFormat.plain("id", time="ts", time_unit="ns"), PLAIN, "time_unit"),
    (ChangeFormat.delta("id"), PLAIN, "no column '_change_type'"),
    (ChangeFormat.delta("id"), DELTA.remove(DELTA.get_field_index("_commit_version")),
     "no column '_commit_version', the sequence .* add it, or name another integer column"),
    (ChangeFormat.debezium("id"), DEBEZIUM.remove(DEBEZIUM.get_field_index("after")), "no column 'after'"),
    (ChangeFormat.debezium_json("id", None), pa.schema([("value", pa.string())]), "row_schema"),
    (ChangeFormat.debezium_json("id", ROW), pa.schema([("value", pa.int64())]), "string column of JSON"),
])
def test_changes_bad_formats_are_refused_with_what_to_change(fmt, schema, message):
    with pytest.raises(JoinDefinitionError, match=message):
        fmt.internal_schema(schema)


def test_changes_format_key_must_name_columns():
    with pytest.raises(JoinDefinitionError, match="distinct column names"):
        ChangeFormat.plain(["id", "id"], time="ts")


DELTA_BUSINESS = DELTA.append(pa.field("valid_from", pa.timestamp("us", "UTC"))).append(pa.field("rev", pa.int64()))


def _at(seconds: int) -> dt.datetime:
    return EPOCH + dt.timedelta(seconds=seconds)


def test_changes_delta_change_time_may_be_a_business_time_column():
    rows = [{"id": 1, "name": "a", "_change_type": "insert", "_commit_version": 7, "_commit_timestamp": _at(100),
             "valid_from": _at(5), "rev": 2}]
    fmt = ChangeFormat.delta("id", time="valid_from")
    result = normalise(pa.Table.from_pylist(rows, schema=DELTA_BUSINESS), fmt)
    assert result.changes.column(TIME).to_pylist() == [5_000_000]
    assert result.changes.column(SEQ).to_pylist() == [7]                      # ties: _commit_version
    assert result.changes.column_names[4:] == ["name", "valid_from", "rev"]   # the business time stays a row column
    named = normalise(pa.Table.from_pylist(rows, schema=DELTA_BUSINESS), ChangeFormat.delta("id", sequence="rev"))
    assert named.changes.column(TIME).to_pylist() == [100_000_000]
    assert named.changes.column(SEQ).to_pylist() == [2]


def test_changes_delta_business_time_must_be_a_timestamp_column():
    with pytest.raises(JoinDefinitionError, match="'name' must be a timestamp"):
        ChangeFormat.delta("id", time="name").internal_schema(DELTA_BUSINESS)
    with pytest.raises(JoinDefinitionError, match="no column 'valid_to'"):
        ChangeFormat.delta("id", time="valid_to").internal_schema(DELTA_BUSINESS)


def test_detect_format_delta_feed_accepts_its_own_change_time():
    from streamjoin.table.spec import detect_format

    assert detect_format("left", DELTA_BUSINESS, "id", None, None) == ChangeFormat.delta("id")
    assert detect_format("left", DELTA_BUSINESS, "id", "valid_from", None) == ChangeFormat.delta("id", time="valid_from")


def test_changes_snapshot_rows_without_a_time_are_kept_only_when_asked():
    table = pa.Table.from_pylist([{"id": 1, "op": "snapshot", "ts": None, "seq": None, "name": "a"},
                                  {"id": 2, "op": "snapshot", "ts": _at(3), "seq": None, "name": "b"}], schema=PLAIN)
    fmt = ChangeFormat.plain("id", time="ts", sequence="seq")
    kept = normalise(table, fmt, timeless_snapshots=True)
    assert kept.changes.column(OP).to_pylist() == [UPSERT, UPSERT]
    assert kept.changes.column(TIME).to_pylist() == [None, 3_000_000]
    refused = normalise(table, fmt)
    assert refused.aside.column("_reason").to_pylist() == ["null change time"]
    assert refused.changes.column(TIME).to_pylist() == [3_000_000]


def _delta_rows(rows: list[tuple]) -> pa.Table:
    """Delta feed rows (id, name, change type, commit version, second)."""
    return pa.Table.from_pylist([{"id": i, "name": n, "_change_type": c, "_commit_version": v,
                                  "_commit_timestamp": EPOCH + dt.timedelta(seconds=s)} for i, n, c, v, s in rows],
                                schema=DELTA)


def test_changes_delta_pre_image_of_a_key_an_update_moved_is_a_delete_of_that_key():
    # UPDATE ... SET id = 5 WHERE id = 3 writes the pre-image of 3 and the post-image of 5: 3 is gone
    feed = _delta_rows([(3, "a", "update_preimage", 1, 10), (5, "a", "update_postimage", 1, 10),
                        (7, "b", "update_preimage", 1, 10), (7, "c", "update_postimage", 1, 10),   # an update of 7
                        (9, "d", "update_preimage", 2, 20), (9, "e", "update_postimage", 3, 30),   # other commits
                        (None, "x", "update_preimage", 2, 20)])
    result = normalise(feed, ChangeFormat.delta("id"))
    changes = sorted((r["id"], r[OP], r[SEQ]) for r in result.changes.to_pylist() if r["id"] is not None)
    assert changes == [(3, DELETE, None), (5, UPSERT, 1), (7, UPSERT, 1), (9, UPSERT, 3), (9, DELETE, None)]
    assert result.counts["key_moves"] == 2 and result.counts["preimages"] == 2   # (7's, and the keyless one)
    assert result.counts["unpaired_preimages"] == 0
    assert result.aside.num_rows == 0


def test_changes_delta_pre_images_stay_skipped_under_a_business_change_time():
    # the pre-image holds the old row's valid_from, not the time of the move: nothing to delete at
    schema = DELTA.append(pa.field("valid_from", pa.timestamp("us", "UTC")))
    feed = _delta_rows([(3, "a", "update_preimage", 1, 10), (5, "a", "update_postimage", 1, 10)])
    feed = feed.append_column("valid_from", feed.column("_commit_timestamp")).cast(schema)
    result = normalise(feed, ChangeFormat.delta("id", time="valid_from"))
    assert [r["id"] for r in result.changes.to_pylist()] == [5]
    assert result.counts["key_moves"] == 0 and result.counts["preimages"] == 1
    assert result.counts["unpaired_preimages"] == 1   # (a move the join cannot apply, counted)


@pytest.mark.parametrize("name", ["debezium", "debezium_json"])
def test_changes_debezium_update_that_moves_a_key_is_a_delete_of_the_old_key_too(name):
    # a join keyed by another unique column than the database's primary key sees its changes as
    # updates: one whose before holds another whole key moved the row, so that key is deleted first
    envelopes = [
        {"op": "u", "before": {"id": 3, "name": "a"}, "after": {"id": 5, "name": "a"}, "ts_ms": 10, "lsn": 7},
        {"op": "u", "before": {"id": 4, "name": "a"}, "after": {"id": 4, "name": "b"}, "ts_ms": 10, "lsn": 8},
        {"op": "u", "before": None, "after": {"id": 6, "name": "b"}, "ts_ms": 10, "lsn": 9},         # no before
        {"op": "u", "before": {"id": None, "name": "x"}, "after": {"id": 8, "name": "b"}, "ts_ms": 10, "lsn": 10},
        {"op": "d", "before": {"id": 9, "name": "a"}, "after": None, "ts_ms": 11, "lsn": 11}]
    fmt, schema = FORMATS[name]
    table = (pa.table({"value": [json.dumps(e) for e in envelopes]}) if name == "debezium_json"
             else pa.Table.from_pylist(envelopes, schema=schema))
    result = normalise(table, fmt)
    changes = [(r["id"], r[OP], r[SEQ], r["name"]) for r in result.changes.to_pylist()]
    assert sorted(changes, key=repr) == sorted([(5, UPSERT, 7, "a"), (4, UPSERT, 8, "b"), (6, UPSERT, 9, "b"),
                                                (8, UPSERT, 10, "b"), (9, DELETE, 11, "a"), (3, DELETE, 7, "a")],
                                               key=repr)
    assert result.index[[c[0] for c in changes].index(3)] == 0   # (from the update's input row)
    assert result.counts["key_moves"] == 1 and result.aside.num_rows == 0
