"""The arrangement (:mod:`streamjoin.statestore.arrangement`) against a dict model; the store
contract suites run it through the ``arranged`` backend too."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from streamjoin.statestore.arrangement import (
    Arrangement,
    ValueLog,
    decode_keys,
    ekeys_of,
    encode_clipped,
    encode_keys,
    widen_keys,
)
from streamjoin.statestore.keycodes import KeyIndex, LazyIndex, search
from streamjoin.statestore.sorted_base import SortedBase

_KEYS = st.binary(max_size=6)
_BYTES = st.sampled_from([b"", b"\x00", b"\x00\x00", b"a", b"a\x00", b"a\x00\x01", b"\xff", b"\xff\x00"]) | _KEYS


@given(st.lists(_BYTES, unique=True, max_size=30))
def test_encode_keys_orders_as_bytes_and_tells_every_key_apart(keys: list[bytes]) -> None:
    encoded = encode_keys(keys)
    assert [keys[i] for i in np.argsort(encoded, kind="stable")] == sorted(keys)
    assert len(set(encoded.tolist())) == len(keys)
    assert encoded.tolist() == encode_keys(pa.array(keys, pa.binary())).tolist()
    assert decode_keys(encoded).to_pylist() == keys


@given(st.integers(0, 5).flatmap(lambda n: st.lists(st.binary(min_size=n, max_size=n), unique=True, max_size=30)),
       st.integers(0, 3))
def test_decode_keys_of_keys_of_one_length_at_any_width(keys: list[bytes], extra: int) -> None:
    width = max((len(k) for k in keys), default=0) + extra
    encoded = encode_keys(keys, width)
    assert decode_keys(encoded).to_pylist() == keys


@given(st.lists(_BYTES, max_size=30), st.integers(0, 4))
def test_widen_keys_is_the_encoding_at_the_wider_width(keys: list[bytes], extra: int) -> None:
    encoded = encode_keys(keys)
    width = encoded.dtype.itemsize - 4 + extra
    assert widen_keys(encoded, width).tolist() == encode_keys(keys, width).tolist()
    if width:
        with pytest.raises(ValueError, match="cannot be narrowed"):
            widen_keys(encode_keys(keys, width), width - 1)


_WRITE = st.tuples(
    st.lists(st.tuples(_BYTES, st.binary(max_size=3)), max_size=8),
    st.lists(_BYTES, max_size=4),
    st.lists(st.tuples(_BYTES, _BYTES), max_size=2),
)


@given(st.lists(_WRITE, max_size=8), st.lists(_BYTES, max_size=10),
       st.lists(st.tuples(st.none() | _BYTES, st.none() | _BYTES), max_size=4))
def test_arrangement_applied_writes_equal_a_dict(writes, probes, ranges) -> None:
    arr, model = Arrangement.empty(), {}
    for puts, deletes, delete_ranges in writes:
        arr = arr.applied(puts, deletes, delete_ranges)
        for start, end in delete_ranges:
            model = {k: v for k, v in model.items() if not start <= k < end}
        for key in deletes:
            model.pop(key, None)
        model.update(puts)
        assert arr.entries(0, len(arr)) == sorted(model.items())
    assert arr.get_many(probes) == [model.get(k) for k in probes]
    expected = [[(k, v) for k, v in sorted(model.items()) if (s is None or s <= k) and (e is None or k < e)]
                for s, e in ranges]
    assert arr.scan_ranges(ranges) == expected
    prefixes = [p[:2] for p in probes]
    assert arr.scan_prefixes(prefixes) == [[(k, v) for k, v in sorted(model.items()) if k.startswith(p)]
                                           for p in prefixes]
    back = arr.columns()
    again = Arrangement.from_columns(ekeys_of(back.column("ekey")), back.column("value").combine_chunks())
    assert again.get_many(probes) == [model.get(k) for k in probes]
    assert arr.nbytes == again.nbytes == sum(len(k) + len(v) for k, v in model.items())


@given(st.lists(st.binary(max_size=6), max_size=40, unique=True), st.lists(st.binary(max_size=7), max_size=40),
       st.sampled_from(["left", "right"]))
def test_arrangement_search_of_probes_in_any_order_equals_numpy_searchsorted(keys, probes, side) -> None:
    # search sorts probes that are out of order before it searches, and gives the positions back in
    # the probes' own order
    width = max(map(len, keys + probes), default=0)
    mine = np.sort(encode_keys(keys, width))
    theirs = encode_keys(probes, width)
    assert search(mine, theirs, side).tolist() == np.searchsorted(mine, theirs, side=side).tolist()


@given(st.integers(0, 6).flatmap(lambda n: st.lists(st.binary(min_size=n, max_size=n), max_size=20)) | st.lists(_BYTES, max_size=20),
       st.integers(0, 7))
def test_encode_clipped_is_the_form_of_each_key_cut_to_the_width(keys, width) -> None:
    encoded, longer = encode_clipped(pa.array(keys, pa.large_binary()), width)
    assert encoded.tolist() == encode_keys([k[:width] for k in keys], width).tolist()
    assert longer.tolist() == [len(k) > width for k in keys]
    if all(len(k) <= width for k in keys):
        assert encode_keys(pa.array(keys, pa.binary()), width).tolist() == encoded.tolist()


# keys that differ in few byte positions (tags and small integers), and probes that leave them anywhere
_NARROW = st.lists(st.sampled_from([b"\x00", b"\x01", b"\x7f", b"\xfe", b"\xff"]), min_size=1, max_size=3)
_SHAPED = st.tuples(st.sampled_from([b"L", b"R"]), st.integers(0, 300), st.integers(0, 70000))


def _shaped(tag: bytes, a: int, b: int) -> bytes:
    return tag + b"\x10" + (a | 1 << 63).to_bytes(8, "big") + b"\x10" + (b | 1 << 63).to_bytes(8, "big")


@given(st.lists(st.one_of(_SHAPED, _NARROW, st.just([b"\x00meta"])), max_size=60),
       st.lists(st.one_of(_SHAPED, _NARROW, st.binary(max_size=19)), max_size=40),
       st.sampled_from(["left", "right"]))
def test_keyindex_search_equals_numpy_searchsorted_of_the_keys(keys, probes, side) -> None:
    # a column of several areas (tags L and R with two integers, short keys, a meta key), probed
    # by keys of its areas and by any bytes
    def plain(k):
        return _shaped(*k) if isinstance(k, tuple) else (b"".join(k) if isinstance(k, list) else k)
    as_bytes, probe_bytes = [plain(k) for k in keys], [plain(p) for p in probes]
    width = max(map(len, as_bytes + probe_bytes), default=0)
    mine = np.unique(encode_keys(as_bytes, width))
    theirs = encode_keys(probe_bytes, width)
    index = KeyIndex.of(mine)
    if index is None:   # no keys, too many first bytes, or no area whose keys differ in at most 8 positions
        matrix = mine.view(np.uint8).reshape(len(mine), mine.dtype.itemsize)
        areas = [matrix[matrix[:, 0] == b] for b in np.unique(matrix[:, 0])]
        assert not len(mine) or len(areas) >= 16 or all((a != a[0]).any(axis=0).sum() > 8 for a in areas)
        return
    assert index.search(theirs, side).tolist() == np.searchsorted(mine, theirs, side=side).tolist()


@given(st.lists(_SHAPED, min_size=1, max_size=60), st.lists(st.booleans(), max_size=60),
       st.lists(st.one_of(_SHAPED, _NARROW, st.just([b"\x00meta"])), max_size=30),
       st.lists(st.one_of(_SHAPED, _NARROW, st.binary(max_size=19)), max_size=40),
       st.sampled_from(["left", "right"]))
def test_keyindex_carried_through_a_merge_searches_as_the_merged_column(keys, dropped, added, probes, side) -> None:
    # a coded column loses some keys and takes others (of its areas, of new first bytes, differing
    # where its keys agree); the carried index, where there is one, searches as the merged column
    def plain(k):
        return _shaped(*k) if isinstance(k, tuple) else (b"".join(k) if isinstance(k, list) else k)
    width = 19
    mine = np.unique(encode_keys([plain(k) for k in keys], width))
    index = KeyIndex.of(mine)
    assert index is not None
    keep = np.ones(len(mine), bool)
    keep[:len(dropped)] = ~np.array(dropped[:len(mine)], bool)
    theirs = np.setdiff1d(np.unique(encode_keys([plain(k) for k in added], width)), mine[keep])
    merged = np.sort(np.concatenate([mine[keep], theirs]))
    slots = np.searchsorted(merged, theirs)
    carried = index.carried(np.flatnonzero(keep), theirs, slots)
    probe = encode_keys([plain(p) for p in probes], width)
    event("not carried" if carried is None else "carried")
    if carried is None:   # an added key the column's codes cannot take
        matrix = theirs.view(np.uint8).reshape(len(theirs), mine.dtype.itemsize)
        assert len(theirs) and any(b not in index.firsts for b in matrix[:, 0]) or \
            KeyIndex.of(np.unique(np.concatenate([mine, theirs]))) is None or \
            any((part.common[part.constant] != row[part.constant]).any()
                for row in matrix for f, part in zip(index.firsts, index.parts) if row[0] == f)
        return
    bound = carried.bind(merged) if len(merged) else None
    if not len(merged):
        return
    assert bound is not None
    assert bound.search(probe, side).tolist() == np.searchsorted(merged, probe, side=side).tolist()
    assert carried.bind(merged[1:]) is None


def test_keyindex_codes_a_store_of_several_areas() -> None:
    keys = [b"\x00meta", *(_shaped(b"L", a, b) for a in range(50) for b in range(0, 1000, 97)),
            *(_shaped(b"R", a, 7 * a) for a in range(300))]
    mine = np.sort(encode_keys(keys))
    index = KeyIndex.of(mine)
    assert index is not None and all(part is not None for part in index.parts)
    assert index.nbytes == 8 * len(keys)
    probes = encode_keys([_shaped(b"L", 3, 97), _shaped(b"L", 3, 98), _shaped(b"R", 5, 35), b"M", b"\x00meta"],
                         mine.dtype.itemsize - 4)
    for side in ("left", "right"):
        assert index.search(probes, side).tolist() == np.searchsorted(mine, probes, side=side).tolist()


@given(st.lists(st.lists(_BYTES | st.none(), min_size=1, max_size=5), min_size=1, max_size=12), st.data())
def test_valuelog_take_gathers_rows_across_its_chunks_in_order(chunks: list[list[bytes | None]], data) -> None:
    """A log of a few chunks (one take a chunk, masked) or of many (sorted by chunk) gives each
    row id's value, -1 a null, in the order asked."""
    log = ValueLog()
    for chunk in chunks:
        log = log.appended(pa.array(chunk, pa.large_binary()))
    flat = [v for chunk in chunks for v in chunk]
    rows = data.draw(st.lists(st.integers(-1, len(flat) - 1), max_size=40))
    taken = log.take(np.array(rows, np.int64)).to_pylist()
    assert taken == [None if r < 0 else flat[r] for r in rows]


def test_sorted_base_searches_as_bytes_when_its_codes_exceed_the_limit() -> None:
    keys = [_shaped(b"L", a, b) for a in range(40) for b in range(25)]
    mine = np.sort(encode_keys(keys))
    values = ValueLog().appended(pa.array([b"v"] * len(keys), pa.large_binary()))
    probes = pa.array([_shaped(b"L", 3, 7), _shaped(b"L", 3, 99), b"M"], pa.binary())
    expected = SortedBase(mine, values).find(probes)
    for limit, coded in ((None, True), (8 * len(keys), True), (8 * len(keys) - 1, False)):
        base = SortedBase(mine, values, limit)
        at, found = base.find(probes)
        assert (at.tolist(), found.tolist()) == (expected[0].tolist(), expected[1].tolist())
        assert (base.codes is not None) == coded


def test_lazyindex_codes_a_column_once_its_searches_probed_a_quarter_of_its_keys() -> None:
    keys = [_shaped(b"L", a, b) for a in range(40) for b in range(25)]   # 1,000 keys
    mine = np.sort(encode_keys(keys))
    lazy = LazyIndex(mine)
    probes = mine[::20]                                                   # 50 probes a search
    for searches in range(1, 5):
        assert lazy.search(probes, "left").tolist() == np.searchsorted(mine, probes).tolist()
        assert lazy._made is False, searches                              # 50 to 200 probed
    assert lazy.search(probes, "right").tolist() == \
        np.searchsorted(mine, probes, side="right").tolist()              # 250: coded
    assert lazy._made and lazy.index is not None
    assert LazyIndex(mine, limit=8 * len(keys) - 1).index is None        # too large for its limit
