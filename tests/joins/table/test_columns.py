"""The table-table join's column-wise paths: ``pack_columns``/``unpack_columns`` give the bytes and
values of ``pack``/``unpack``, and a side whose primary key is its join key (read by point lookups,
never scanned) keeps the view equal to the reference join."""

from __future__ import annotations

import math
import random
import shutil
import tempfile

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.statestore import destroy_store, open_store
from streamjoin.statestore.codecs import pack, unpack
from streamjoin.statestore.packed_columns import pack_columns, unpack_columns
from streamjoin.table.operator import TableTableJoin
from streamjoin.testing.table import reference_view
from streamjoin.view import MaterializedView
from tests.examples import scaled

_TYPES = {
    pa.int64(): st.integers(-(1 << 63), (1 << 63) - 1),
    pa.int32(): st.integers(-(1 << 31), (1 << 31) - 1),
    pa.uint8(): st.integers(0, 255),
    pa.float64(): st.floats(allow_nan=True),
    pa.float32(): st.floats(width=32, allow_nan=True),
    pa.bool_(): st.booleans(),
    # (longer than a window of the decoder's search for a value's end: some end in the next one)
    pa.string(): st.text(alphabet=st.sampled_from("a\x00\xff\u00ffz"), max_size=40),
    pa.large_string(): st.text(max_size=4),
    pa.binary(): st.binary(max_size=40),
    pa.binary(2): st.binary(min_size=2, max_size=2),
}


@st.composite
def columns(draw):
    """Columns of one length, each with or without nulls, some sliced (an offset into their buffers)."""
    kinds = draw(st.lists(st.sampled_from(list(_TYPES) + [pa.null()]), min_size=1, max_size=5))
    n = draw(st.integers(0, 12))
    out = []
    for kind in kinds:
        if pa.types.is_null(kind):
            out.append(pa.nulls(n))
            continue
        skip = draw(st.integers(0, 2))
        values = _TYPES[kind] if draw(st.booleans()) else st.none() | _TYPES[kind]
        out.append(pa.array(draw(st.lists(values, min_size=n + skip, max_size=n + skip)), kind).slice(skip))
    return out


def _same(a: list, b: list) -> bool:
    return [repr(v) if isinstance(v, float) and math.isnan(v) else v for v in a] == \
        [repr(v) if isinstance(v, float) and math.isnan(v) else v for v in b]


@settings(max_examples=scaled(200))
@given(cols=columns())
def test_pack_and_unpack_columns_equal_pack_and_unpack_per_row(cols):
    n = len(cols[0])
    data = pack_columns(cols, n)
    assert data == [pack(*row) for row in zip(*(c.to_pylist() for c in cols))]
    decoded = unpack_columns(data, [c.type for c in cols])
    assert decoded is not None
    in_place = unpack_columns(pa.array(data, pa.binary()).slice(0), [c.type for c in cols])
    assert in_place is not None and all(_same(a.to_pylist(), b.to_pylist()) for a, b in zip(in_place, decoded))
    rows = [unpack(d) for d in data]
    for i, (column, kind) in enumerate(zip(decoded, (c.type for c in cols))):
        assert column.type == kind
        assert _same(column.to_pylist(), pa.array([r[i] for r in rows], kind).to_pylist())


def test_row_codec_decode_table_reads_a_binary_array_as_its_bytes():
    """An Arrow binary array decodes as the list of its bytes does, a slice of one too, and bytes
    the column-wise decoder declines go row by row (which raises for rows of other types)."""
    from streamjoin.table.rows import RowCodec

    codec = RowCodec(pa.schema([("a", pa.int64()), ("b", pa.string())]))
    data = [pack(1, "x"), pack(None, "y\x00z"), pack(-5, None)]
    assert codec.decode_table(pa.array(data, pa.binary())).equals(codec.decode_table(data))
    assert codec.decode_table(pa.array([b"", *data], pa.binary()).slice(1)).equals(codec.decode_table(data))
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        codec.decode_table(pa.array([pack(1, 2)], pa.binary()))


def test_unpack_columns_declines_bytes_of_other_types():
    assert unpack_columns([pack(1, "a")], [pa.int64()]) is None
    assert unpack_columns([pack(1)], [pa.int64(), pa.string()]) is None
    assert unpack_columns([pack("a")], [pa.int64()]) is None
    with pytest.raises(OverflowError):
        pack_columns([pa.array([1 << 63], pa.uint64())], 1)


ORDERS = pa.schema([("oid", pa.int64()), ("ca", pa.int64()), ("cb", pa.string()), ("x", pa.float64()),
                    ("op", pa.string()), ("at", pa.int64())])
CUSTOMERS = pa.schema([("cb", pa.string()), ("ca", pa.int64()), ("name", pa.string()), ("op", pa.string()),
                       ("at", pa.int64())])
# (on, left key, right key): the right side's key is its join key (in order, permuted), both sides'
_SHAPES = (((["ca"], ["ca"]), "oid", "ca"), ((["ca", "cb"], ["ca", "cb"]), "oid", ["cb", "ca"]),
           ((["oid"], ["ca"]), "oid", "ca"))


@pytest.mark.parametrize("how", ["inner", "left", "full"])
@pytest.mark.parametrize("shape", range(len(_SHAPES)))
def test_a_side_keyed_by_its_join_key_keeps_the_view_equal_to_the_reference(shape, how):
    (on, left_key, right_key), rnd = _SHAPES[shape], random.Random(shape * 7 + len(how))
    root = tempfile.mkdtemp(prefix="sj-direct-")
    join = TableTableJoin(ORDERS, CUSTOMERS, on, left_key=left_key, right_key=right_key, how=how,
                          left_time="at", right_time="at")
    runner = PlanRunner(join.plan, f"{root}/cp", partitions=2,
                                   config=StateConfig(store="memory", local_dir=f"{root}/local"))
    view = MaterializedView(open_store("memory", f"{root}/view"), *join.view_key, join.output_schema)
    lkey, rkey = [left_key] if isinstance(left_key, str) else left_key, right_key if isinstance(right_key, list) else [right_key]
    tables: list[dict] = [{}, {}]
    try:
        at = 0
        for _ in range(8):
            batches = []
            for schema, table, key in ((ORDERS, tables[0], lkey), (CUSTOMERS, tables[1], rkey)):
                rows = []
                for _ in range(rnd.randint(0, 20)):
                    at += 1
                    row = {"oid": rnd.randint(0, 9), "ca": rnd.choice([None, 0, 1, 2]),
                           "cb": rnd.choice([None, "a", "b\x00"]), "x": rnd.choice([None, 1.5, -0.0]),
                           "name": rnd.choice([None, "n", "m"]), "op": rnd.choice(["upsert"] * 3 + ["delete"]),
                           "at": at}
                    row = {c: row[c] for c in schema.names}
                    if schema is CUSTOMERS:
                        row["ca"] = row["ca"] if row["ca"] is not None else 0
                        row["cb"] = row["cb"] if row["cb"] is not None else "a"
                    pk = tuple(row[k] for k in key)
                    if row["op"] == "delete":
                        table.pop(pk, None)
                    else:
                        table[pk] = {c: row[c] for c in schema.names if c != "op"}
                    rows.append(row)
                batches.append(pa.Table.from_pylist(rows, schema=schema))
            view.apply(runner.run(*batches))
            expected = reference_view(tables[0], tables[1], left_on=on[0], right_on=on[1], how=how,
                                      left_columns=[c for c in ORDERS.names if c != "op"],
                                      right_columns=[c for c in CUSTOMERS.names if c != "op"])
            names = [f.name for f in join.output_schema][:len(ORDERS.names) + len(CUSTOMERS.names) - 2]
            got = [tuple(r[n] for n in names) for r in view.rows().to_pylist()]
            assert sorted(got, key=repr) == sorted(expected.values(), key=repr)
    finally:
        view.store.close()
        destroy_store("memory", f"{root}/view")
        runner.lose_local_state()
        shutil.rmtree(root, ignore_errors=True)
