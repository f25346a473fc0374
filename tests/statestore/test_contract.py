"""The store contract (streamjoin.statestore.base), written once and run against every backend."""

from __future__ import annotations

import pytest

from streamjoin.statestore import (
    Store,
    StoreClosedError,
    StoreError,
    StoreLockedError,
    StoreWriteError,
    prefix_end,
)
from streamjoin.statestore.registry import resolve_backend
from tests.statestore.conftest import REGISTERED_USER_KIND, Backend
from tests.statestore.userstore import PickleStore

KEYS = [b"\x00", b"\x00\x00", b"a", b"ab", b"abc", b"b", b"b\xff", b"b\xff\xff", b"c", b"\xff", b"\xff\xff"]


def fill(store: Store, keys: list[bytes] = KEYS) -> dict[bytes, bytes]:
    model = {k: b"v" + k for k in keys}
    store.write(puts=list(model.items()))
    return model


def expected(model: dict[bytes, bytes], start: bytes | None, end: bytes | None, reverse: bool = False):
    keys = sorted(k for k in model if (start is None or k >= start) and (end is None or k < end))
    return [(k, model[k]) for k in (reversed(keys) if reverse else keys)]


# -- reads -----------------------------------------------------------------------------------------


def test_store_get_returns_value_or_none(store: Store) -> None:
    assert store.get(b"a") is None
    store.write(puts=[(b"a", b"1"), (b"b", b"")])
    assert store.get(b"a") == b"1"
    assert store.get(b"b") == b""  # an empty value is a value, not an absence
    assert store.get(b"c") is None


def test_store_multi_get_keeps_order_and_reports_missing(store: Store) -> None:
    fill(store)
    keys = [b"c", b"nope", b"a", b"a", b"\xff"]
    assert store.multi_get(keys) == [b"vc", None, b"va", b"va", b"v\xff"]
    assert store.multi_get(iter(keys)) == store.multi_get(tuple(keys))
    assert store.multi_get([]) == []


@pytest.mark.parametrize(
    "start,end",
    [(None, None), (b"a", None), (None, b"b"), (b"a", b"b"), (b"ab", b"b\xff"), (b"\x00", b"\x00\x01"),
     (b"aa", b"az"), (b"\xff", None), (b"\xff\xff\xff", None), (None, b"\x00")],
)
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_store_scan_bounds_are_start_inclusive_end_exclusive(
    store: Store, start: bytes | None, end: bytes | None, reverse: bool
) -> None:
    model = fill(store)
    assert list(store.scan(start, end, reverse)) == expected(model, start, end, reverse)


@pytest.mark.parametrize("start,end", [(b"b", b"b"), (b"c", b"a"), (b"abd", b"b"), (b"\xff\xff\x01", b"\xff\xff\x02")])
def test_store_scan_empty_ranges_yield_nothing(store: Store, start: bytes, end: bytes) -> None:
    fill(store)
    assert list(store.scan(start, end)) == []
    assert list(store.scan(start, end, reverse=True)) == []


def test_store_scan_of_empty_store_yields_nothing(store: Store) -> None:
    assert list(store.scan()) == []
    assert list(store.scan(reverse=True)) == []
    assert list(store.scan(b"a", b"b", reverse=True)) == []


@pytest.mark.parametrize("prefix", [b"", b"a", b"ab", b"b", b"b\xff", b"\xff", b"\xff\xff", b"zz", b"\x00"])
def test_store_scan_prefix_matches_startswith(store: Store, prefix: bytes) -> None:
    model = fill(store)
    want = [(k, model[k]) for k in sorted(model) if k.startswith(prefix)]
    assert list(store.scan_prefix(prefix)) == want
    assert list(store.scan_prefix(prefix, reverse=True)) == want[::-1]


def columns_as_pairs(store: Store, start: bytes | None = None, end: bytes | None = None) -> list[tuple[bytes, bytes]]:
    chunks = list(store.scan_columns(start, end))
    for keys, values in chunks:
        assert len(keys) == len(values) and len(keys) > 0
    return [pair for keys, values in chunks for pair in zip(keys.to_pylist(), values.to_pylist())]


@pytest.mark.parametrize(
    "start,end",
    [(None, None), (b"a", None), (None, b"b"), (b"ab", b"b\xff"), (b"aa", b"az"), (b"\xff\xff\xff", None),
     (b"b", b"b"), (b"c", b"a")],
)
def test_store_scan_columns_equals_scan(store: Store, start: bytes | None, end: bytes | None) -> None:
    assert columns_as_pairs(store, start, end) == []
    model = fill(store)
    store.write(puts=[(b"ab", b"new")], deletes=[b"b", b"zz"])
    model[b"ab"] = b"new"
    del model[b"b"]
    assert columns_as_pairs(store, start, end) == expected(model, start, end) == list(store.scan(start, end))


def test_store_scan_columns_rejects_bounds_that_are_not_bytes(store: Store) -> None:
    with pytest.raises(StoreError, match="scan_columns"):
        store.scan_columns("a", None)


RANGES = [(b"a", b"b"), (None, b"ab"), (b"b", None), (b"c", b"a"), (b"b", b"b"), (None, None), (b"a", b"abd"),
          (b"\xff", b"\xff\xff\x00"), (b"zz", None), (b"", b"\x00\x01")]


def test_store_scan_ranges_answers_each_range_in_the_order_given(store: Store) -> None:
    model = fill(store)
    ranges = RANGES + RANGES[::-1]  # overlapping, out of order and repeated ranges
    assert store.scan_ranges(ranges) == [expected(model, start, end) for start, end in ranges]
    assert store.scan_ranges(iter(RANGES[:3])) == [expected(model, start, end) for start, end in RANGES[:3]]
    assert store.scan_ranges([]) == []


def test_store_scan_prefixes_match_scan_prefix(store: Store) -> None:
    fill(store)
    prefixes = [b"", b"a", b"ab", b"b", b"b\xff", b"\xff", b"\xff\xff", b"zz", b"\x00", b"a"]
    assert store.scan_prefixes(prefixes) == [list(store.scan_prefix(p)) for p in prefixes]


def test_store_scan_ranges_of_an_empty_store_gives_empty_lists(store: Store) -> None:
    assert store.scan_ranges(RANGES) == [[] for _ in RANGES]


@pytest.mark.parametrize("bad", [[(b"a", "z")], [("a", None)], [(b"a",)], [b"ab"], [7]], ids=str)
def test_store_scan_ranges_rejects_bounds_that_are_not_bytes(store: Store, bad: list) -> None:
    fill(store)
    with pytest.raises(StoreError, match="scan_ranges"):
        store.scan_ranges([(b"a", b"b"), *bad])


@pytest.mark.parametrize("bad", ["a", None, 7], ids=str)
def test_store_scan_prefixes_rejects_a_prefix_that_is_not_bytes(store: Store, bad: object) -> None:
    with pytest.raises(StoreError, match="scan_prefixes"):
        store.scan_prefixes([b"a", bad])


def test_prefix_end_is_smallest_key_after_prefix() -> None:
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"\xff\xff") is None


# -- writes ----------------------------------------------------------------------------------------


def test_store_write_applies_ranges_then_deletes_then_puts(store: Store) -> None:
    fill(store)
    store.write(
        puts=[(b"ab", b"new"), (b"c", b"new")],
        deletes=[b"ab", b"b", b"c"],
        delete_ranges=[(b"a", b"b")],
    )
    assert store.get(b"ab") == b"new"  # deleted by the range and by key, then put
    assert store.get(b"c") == b"new"  # deleted, then put
    assert store.get(b"a") is None and store.get(b"abc") is None  # in the range
    assert store.get(b"b") is None  # deleted
    assert store.get(b"b\xff") == b"vb\xff"  # untouched


def test_store_write_last_put_of_a_key_wins(store: Store) -> None:
    store.write(puts=[(b"k", b"1"), (b"k", b"2"), (b"j", b"0"), (b"k", b"3")])
    assert list(store.scan()) == [(b"j", b"0"), (b"k", b"3")]


def test_store_write_range_delete_with_inverted_or_empty_range_is_noop(store: Store) -> None:
    model = fill(store)
    store.write(delete_ranges=[(b"c", b"a"), (b"b", b"b")])
    assert list(store.scan()) == expected(model, None, None)


def test_store_write_range_delete_to_end_of_key_space(store: Store) -> None:
    fill(store)
    store.write(delete_ranges=[(b"b", b"\xff\xff\xff")])
    assert [k for k, _ in store.scan()] == [b"\x00", b"\x00\x00", b"a", b"ab", b"abc"]


BAD_WRITES = {
    "value-str": dict(puts=[(b"a", b"1"), (b"b", "2"), (b"c", b"3")]),
    "value-none": dict(puts=[(b"a", b"1"), (b"b", None)]),
    "key-int": dict(puts=[(b"a", b"1"), (7, b"2")]),
    "delete-str": dict(puts=[(b"a", b"1")], deletes=[b"x", "y"]),
    "range-str": dict(puts=[(b"a", b"1")], delete_ranges=[(b"a", "z")]),
    "range-inverted-str": dict(delete_ranges=[("z", "a")]),
    "triple": dict(puts=[(b"a", b"1"), (b"b", b"2", b"3")]),
}


@pytest.mark.parametrize("bad", list(BAD_WRITES.values()), ids=list(BAD_WRITES))
def test_store_write_with_a_bad_entry_applies_nothing(store: Store, bad: dict) -> None:
    model = fill(store)
    store.write(version=4)
    with pytest.raises(StoreWriteError):
        store.write(**{"deletes": [b"a"], **bad}, version=5)
    assert list(store.scan()) == expected(model, None, None)
    assert store.version == 4


def test_store_write_from_a_failing_generator_applies_nothing(store: Store) -> None:
    model = fill(store)

    def puts():
        yield b"new1", b"1"
        raise RuntimeError("source failed")

    with pytest.raises(RuntimeError, match="source failed"):
        store.write(puts=puts(), deletes=[b"a"], version=9)
    assert list(store.scan()) == expected(model, None, None)
    assert store.version is None


def test_store_write_rejects_a_non_int_version(store: Store) -> None:
    with pytest.raises(TypeError):
        store.write(puts=[(b"a", b"1")], version=True)
    with pytest.raises(TypeError):
        store.write(version="3")
    assert store.get(b"a") is None


# -- version, lifecycle ------------------------------------------------------------------------------


def test_store_version_persists_across_reopen(backend: Backend, store_path: str) -> None:
    with backend.open(store_path) as store:
        assert store.version is None
        store.write(puts=[(b"a", b"1")], version=-3)
        assert store.version == -3
        store.write(puts=[(b"b", b"2")])  # no version: the marker stays
        assert store.version == -3
        store.write(version=2**62)
    with backend.open(store_path) as store:
        assert store.version == 2**62
        assert list(store.scan()) == [(b"a", b"1"), (b"b", b"2")]
    backend.destroy(store_path)


def test_store_memo_lives_as_long_as_the_open_store(backend: Backend, store_path: str) -> None:
    store = backend.open(store_path)
    store.memo()["cache"] = 1
    store.write(puts=[(b"a", b"1")], version=1)   # the store never touches it
    assert store.memo() == {"cache": 1}
    store.close()
    with pytest.raises(StoreClosedError):
        store.memo()
    store = backend.open(store_path)
    assert store.memo() == {}   # a new open store, a new memo
    store.close()
    backend.destroy(store_path)


def test_store_use_after_close_raises_closed_error(store: Store) -> None:
    store.write(puts=[(b"a", b"1")], version=1)
    store.close()
    store.close()  # idempotent
    assert store.closed
    calls = [
        lambda: store.get(b"a"), lambda: store.multi_get([b"a"]), lambda: store.scan(),
        lambda: store.scan_prefix(b"a"), lambda: store.scan_ranges([(b"a", None)]),
        lambda: store.scan_prefixes([b"a"]), lambda: store.write(puts=[(b"b", b"2")]),
        lambda: store.version, lambda: store.stats(), lambda: store.load_sorted([]),
    ]
    for call in calls:
        with pytest.raises(StoreClosedError):
            call()


def test_store_context_manager_closes_on_exit(backend: Backend, store_path: str) -> None:
    with pytest.raises(KeyError):
        with backend.open(store_path) as store:
            store.write(puts=[(b"a", b"1")])
            raise KeyError("boom")
    assert store.closed
    with backend.open(store_path) as again:  # the handle was released
        assert again.get(b"a") == b"1"
    backend.destroy(store_path)


def test_store_second_handle_in_this_process_is_refused(backend: Backend, store_path: str) -> None:
    with backend.open(store_path):
        with pytest.raises(StoreLockedError, match="store"):
            backend.open(store_path)
    backend.open(store_path).close()  # free again after close
    backend.destroy(store_path)


def test_destroy_store_removes_contents_and_version(backend: Backend, store_path: str) -> None:
    with backend.open(store_path) as store:
        store.write(puts=[(b"a", b"1")], version=7)
    backend.destroy(store_path)
    backend.destroy(store_path)  # a missing store is fine
    with backend.open(store_path) as store:
        assert store.version is None and list(store.scan()) == []
    backend.destroy(store_path)


def test_destroy_store_refuses_an_open_store(backend: Backend, store_path: str) -> None:
    with backend.open(store_path) as store:
        store.write(puts=[(b"a", b"1")])
        with pytest.raises(StoreLockedError):
            backend.destroy(store_path)
        assert store.get(b"a") == b"1"
    backend.destroy(store_path)


# -- bulk load, stats ----------------------------------------------------------------------------------


def test_store_load_sorted_fills_an_empty_store(store: Store) -> None:
    items = [(b"k%05d" % i, b"v%d" % i) for i in range(3000)]
    assert store.load_sorted(iter(items), version=11) == 3000
    assert store.version == 11
    assert list(store.scan()) == items
    assert store.get(b"k00042") == b"v42"


def test_store_load_sorted_of_nothing_sets_the_version(store: Store) -> None:
    assert store.load_sorted([], version=0) == 0
    assert store.version == 0 and list(store.scan()) == []


def test_store_load_sorted_refuses_a_store_with_entries(store: Store) -> None:
    store.write(puts=[(b"a", b"1")])
    with pytest.raises(StoreError, match="empty"):
        store.load_sorted([(b"b", b"2")], version=1)
    assert store.version is None and list(store.scan()) == [(b"a", b"1")]


@pytest.mark.parametrize("keys", [[b"a", b"c", b"b"], [b"a", b"b", b"b"]], ids=["descending", "duplicate"])
def test_store_load_sorted_rejects_keys_out_of_order(store: Store, keys: list[bytes]) -> None:
    with pytest.raises(StoreError, match="ascending"):
        store.load_sorted([(k, b"v") for k in keys], version=1)
    assert store.version is None


def test_store_stats_count_entries_and_bytes(store: Store) -> None:
    assert store.stats().entries == 0
    store.write(puts=[(b"k%03d" % i, b"x" * 10) for i in range(200)])
    stats = store.stats()
    if stats.exact:
        assert (stats.entries, stats.bytes) == (200, 200 * 14)
    else:  # an estimate: the right order of magnitude
        assert 100 <= stats.entries <= 400 and stats.bytes > 0


# -- plugging in -------------------------------------------------------------------------------------


def test_user_backend_plugs_in_by_import_path_and_by_name() -> None:
    assert resolve_backend("tests.statestore.userstore:PickleStore") is PickleStore
    assert resolve_backend(REGISTERED_USER_KIND) is PickleStore


# -- the whole key space: the empty key and long keys ---------------------------------------------

#: Keys of every length a backend might treat specially: empty, around 480-512 bytes (LMDB's own
#: limit is 511), several KB, and many long keys sharing a long prefix, next to short keys that are
#: prefixes of them.
SHARED = b"s" * 700
EDGE_KEYS = sorted(
    {b"", b"\x00", b"L", b"M"}
    | {b"L" * n for n in (479, 480, 481, 511, 512, 600)}
    | {b"L" * 480 + b"\x00", b"L" * 480 + b"\xff", b"L" * 479 + b"M", b"L" * 600 + b"\x00" * 10}
    | {b"H" * 5000, b"H" * 5000 + b"\x01", b"H" * 4999 + b"I"}
    | {SHARED + b"%04d" % i for i in range(0, 120, 3)}
    | {SHARED, SHARED[:480], SHARED[:481] + b"\xff"}
)
EDGE_BOUNDS = [
    None, b"", b"\x00", b"L", b"L" * 480, b"L" * 481, b"L" * 480 + b"\x80", b"L" * 600 + b"\x00",
    b"M", b"H" * 5000, SHARED, SHARED + b"0050", SHARED + b"0050\x00", SHARED[:480] + b"\x00", b"t",
]


def edge_model() -> dict[bytes, bytes]:
    return {k: b"v%d" % len(k) + k[-3:] for k in EDGE_KEYS}


def test_store_puts_and_gets_empty_and_long_keys(backend: Backend, store_path: str) -> None:
    model = edge_model()
    with backend.open(store_path) as store:
        store.write(puts=list(model.items()), version=1)
        for key, value in model.items():
            assert store.get(key) == value, len(key)
        wanted = [b"L" * 482, *EDGE_KEYS[::-1], b"", SHARED + b"0001", b"H" * 5001]
        assert store.multi_get(wanted) == [model.get(k) for k in wanted]
        assert list(store.scan()) == expected(model, None, None)
    if backend.on_disk:  # the layout survives a reopen
        with backend.open(store_path) as store:
            assert list(store.scan(reverse=True)) == expected(model, None, None, reverse=True)
            assert store.version == 1
    backend.destroy(store_path)


@pytest.mark.parametrize("start", EDGE_BOUNDS, ids=lambda b: "None" if b is None else f"{len(b)}:{b[-4:]!r}")
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_store_scan_bounds_with_empty_and_long_keys(store: Store, start: bytes | None, reverse: bool) -> None:
    model = edge_model()
    store.write(puts=list(model.items()))
    for end in EDGE_BOUNDS:
        assert list(store.scan(start, end, reverse)) == expected(model, start, end, reverse), end
    for prefix in (b"", b"L" * 480, b"L" * 481, SHARED, SHARED + b"00", b"H" * 4999):
        want = [(k, model[k]) for k in sorted(model) if k.startswith(prefix)]
        assert list(store.scan_prefix(prefix, reverse)) == (want[::-1] if reverse else want)


def test_store_scan_ranges_with_empty_and_long_keys(store: Store) -> None:
    model = edge_model()
    store.write(puts=list(model.items()))
    ranges = [(start, end) for start in EDGE_BOUNDS for end in EDGE_BOUNDS]
    assert store.scan_ranges(ranges) == [expected(model, start, end) for start, end in ranges]
    prefixes = [b"", b"L" * 480, b"L" * 481, SHARED, SHARED + b"00", b"H" * 4999, b"L", SHARED[:480]]
    assert store.scan_prefixes(prefixes) == [[(k, model[k]) for k in sorted(model) if k.startswith(p)]
                                             for p in prefixes]


def test_store_deletes_empty_and_long_keys(store: Store) -> None:
    model = edge_model()
    store.write(puts=list(model.items()))
    gone = [b"", b"L" * 512, SHARED + b"0003", b"H" * 5000, b"L" * 480, b"never" * 200]
    store.write(deletes=gone)
    for key in gone:
        model.pop(key, None)
    assert list(store.scan()) == expected(model, None, None)
    # a delete and a put of one long key in one write: the put wins
    store.write(puts=[(SHARED + b"0006", b"new")], deletes=[SHARED + b"0006", SHARED + b"0009"])
    model[SHARED + b"0006"] = b"new"
    del model[SHARED + b"0009"]
    assert list(store.scan()) == expected(model, None, None)
    assert store.get(SHARED + b"0009") is None and store.get(b"") is None


@pytest.mark.parametrize(
    "start,end",
    [(b"", b"\x00"), (b"", b"L" * 481), (b"L" * 480, b"L" * 480 + b"\x80"), (b"L" * 481, b"M"),
     (SHARED + b"0030", SHARED + b"0090"), (SHARED[:480] + b"\x00", b"t"), (b"H" * 5000, b"H" * 5000 + b"\x01"),
     (b"", b"\xff")],
)
def test_store_delete_range_over_empty_and_long_keys(store: Store, start: bytes, end: bytes) -> None:
    model = edge_model()
    store.write(puts=list(model.items()))
    store.write(delete_ranges=[(start, end)], puts=[(SHARED + b"0060", b"put after the range")])
    model = {k: v for k, v in model.items() if not start <= k < end}
    model[SHARED + b"0060"] = b"put after the range"
    assert list(store.scan()) == expected(model, None, None)
    assert list(store.scan(reverse=True)) == expected(model, None, None, reverse=True)


def test_store_load_sorted_with_empty_and_long_keys(backend: Backend, store_path: str) -> None:
    items = sorted(edge_model().items())
    with backend.open(store_path) as store:
        assert store.load_sorted(iter(items), version=4) == len(items)
        assert list(store.scan()) == items and store.version == 4
        assert store.get(b"") == dict(items)[b""]
    if backend.on_disk:
        with backend.open(store_path) as store:
            assert list(store.scan()) == items
    backend.destroy(store_path)


@pytest.mark.parametrize(
    "keys",
    [[b"L" * 600, b"L" * 480], [SHARED + b"2", SHARED + b"1"], [b"a", b""], [b"L" * 600, b"L" * 600]],
    ids=["short-after-its-long-extension", "long-suffixes-descending", "empty-last", "long-duplicate"],
)
def test_store_load_sorted_rejects_long_keys_out_of_order(store: Store, keys: list[bytes]) -> None:
    with pytest.raises(StoreError, match="ascending"):
        store.load_sorted([(k, b"v") for k in keys], version=1)
    assert store.version is None
