"""The materialized view helper (streamjoin.view): applying a change stream, reading it back by key
and as a table, and refusing a stream that does not fit the view."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from streamjoin.statestore import backend_names, destroy_store, open_store
from streamjoin.view import MaterializedView, ViewError

SCHEMA = pa.schema([("post_id", pa.int64()), ("text", pa.string()), ("fid", pa.int64()), ("at", pa.timestamp("us")),
                    ("_change_type", pa.string()), ("_commit_version", pa.int64()), ("_seq", pa.int64())])


def changes(*rows: tuple) -> pa.Table:
    """rows: (post_id, text, fid, change type, version, seq)."""
    return pa.Table.from_pylist([{"post_id": p, "text": t, "fid": f, "at": None, "_change_type": c,
                                  "_commit_version": v, "_seq": s} for p, t, f, c, v, s in rows], schema=SCHEMA)


@pytest.fixture(params=backend_names())
def view(request):
    path = os.path.join(tempfile.mkdtemp(prefix="sj-view-"), "view")
    store = open_store(request.param, path)
    yield MaterializedView(store, "post_id", "fid", SCHEMA)
    store.close()
    destroy_store(request.param, path)


def test_view_applies_changes_in_version_and_seq_order(view):
    # out of order on purpose: the insert of version 1 comes first, its retraction (seq 0) later
    view.apply(changes((1, "b", 7, "update_postimage", 1, 1), (1, "a", 7, "insert", 0, 1),
                       (2, "x", None, "insert", 0, 1), (1, "a", 7, "update_preimage", 1, 0)))
    assert view.get(1, 7)["text"] == "b"
    assert view.get(2, None)["text"] == "x"
    assert view.get(3, 7) is None
    assert view.rows().column("post_id").to_pylist() == [1, 2]
    assert len(view) == 2 and view.store.version == 1
    view.apply(changes((2, "x", None, "delete", 2, 0), (2, "x", 7, "insert", 2, 1)))
    assert view.rows().to_pylist() == [{"post_id": 1, "text": "b", "fid": 7, "at": None},
                                       {"post_id": 2, "text": "x", "fid": 7, "at": None}]


def test_view_writes_parquet(view):
    view.apply(changes((1, "a", 7, "insert", 0, 1)))
    path = os.path.join(tempfile.mkdtemp(prefix="sj-view-pq-"), "view.parquet")
    view.write_parquet(path)
    assert pq.read_table(path).to_pylist() == [{"post_id": 1, "text": "a", "fid": 7, "at": None}]


@pytest.mark.parametrize("stream, message", [
    ([(1, "a", 7, "insert", 0, 1), (1, "a", 7, "insert", 1, 1)], "insert of a row the view already holds"),
    ([(1, "a", 7, "delete", 0, 0)], "delete of a row the view does not hold"),
    ([(1, "a", 7, "insert", 0, 1), (1, "z", 7, "update_preimage", 1, 0)], "differs from the row the view holds"),
    ([(1, "a", 7, "upsert", 0, 1)], "unknown _change_type 'upsert'"),
])
def test_view_refuses_an_inconsistent_stream_and_writes_nothing(view, stream, message):
    with pytest.raises(ViewError, match=message):
        view.apply(changes(*stream))
    assert len(view) == 0


def test_view_refuses_a_stream_without_its_columns(view):
    with pytest.raises(ViewError, match="lacks columns"):
        view.apply(pa.table({"post_id": [1]}))
    with pytest.raises(ViewError, match="no key column"):
        MaterializedView(view.store, "nope", "fid", SCHEMA)
    # a key named on both sides is suffixed in the join's output: the error names the column
    suffixed = pa.schema([pa.field("fid_right" if f.name == "fid" else f.name, f.type) for f in SCHEMA])
    with pytest.raises(ViewError, match=r"no key column 'fid' \(a name on both sides of the join is suffixed: "
                                        r"'fid_right'\?\)"):
        MaterializedView(view.store, "post_id", "fid", suffixed)
