"""``TimedStore``: every call into the wrapped store, timed, returning exactly what it returns."""

from __future__ import annotations

import itertools
import os

import pytest

from streamjoin.statestore import Store, StoreClosedError, StoreError, open_store
from streamjoin.statestore.timed import StoreTimer, TimedStore

ENTRIES = [(b"a", b"1"), (b"ab", b"2"), (b"b", b"3"), (b"ba", b"4"), (b"c", b"5")]


@pytest.fixture(params=["memory", "rocksdb"])
def inner(request, tmp_path) -> Store:
    store = open_store(request.param, os.path.join(str(tmp_path), "store"))
    store.write(ENTRIES, version=3)
    yield store
    store.close()


@pytest.fixture
def clock(monkeypatch):
    """``perf_counter`` advancing one second a call: a timed call adds exactly 1.0."""
    ticks = itertools.count()
    monkeypatch.setattr("streamjoin.statestore.timed.time.perf_counter", lambda: float(next(ticks)))


def test_timed_store_reads_return_exactly_what_the_wrapped_store_returns(inner):
    timed = TimedStore(inner)

    assert timed.get(b"ab") == inner.get(b"ab") == b"2" and timed.get(b"zz") is None
    assert timed.multi_get([b"c", b"x", b"a"]) == inner.multi_get([b"c", b"x", b"a"])
    assert timed.multi_get(k for k in (b"b",)) == [b"3"]
    assert list(timed.scan()) == list(inner.scan()) == ENTRIES
    assert list(timed.scan(b"ab", b"c", reverse=True)) == list(inner.scan(b"ab", b"c", reverse=True))
    assert list(timed.scan(b"c", b"a")) == []
    assert list(timed.scan_prefix(b"b")) == list(inner.scan_prefix(b"b")) == ENTRIES[2:4]
    ranges = [(b"a", b"b"), (b"c", b"a"), (None, b"ab"), (b"ba", None)]
    assert timed.scan_ranges(ranges) == inner.scan_ranges(ranges)
    assert timed.scan_prefixes([b"a", b"x", b""]) == inner.scan_prefixes([b"a", b"x", b""])
    assert (timed.version, timed.owner, timed.stats()) == (inner.version, inner.owner, inner.stats())
    timed.check_files()
    assert timed.memo() is inner.memo()
    with pytest.raises(StoreError):
        timed.scan_prefixes([b"a", "b"])   # what the wrapped store raises, raised as it is


def test_timed_store_writes_and_loads_what_the_wrapped_store_would(inner, tmp_path):
    timed = TimedStore(inner)
    timed.write(puts=[(b"d", b"6"), (b"a", b"0")], deletes=[b"ab"], delete_ranges=[(b"b", b"bz")], version=4)
    assert list(inner.scan()) == [(b"a", b"0"), (b"c", b"5"), (b"d", b"6")] and inner.version == 4

    empty = TimedStore(open_store("memory", str(tmp_path / "empty")))
    assert empty.load_sorted(iter(ENTRIES), version=9) == len(ENTRIES)
    assert list(empty.inner.scan()) == ENTRIES and empty.inner.version == 9
    empty.close()
    assert empty.inner.closed and empty.closed
    with pytest.raises(StoreClosedError):
        empty.get(b"a")


def test_timed_store_counts_the_seconds_inside_each_call(inner, clock):
    timer = StoreTimer()
    timed = timer.wrap(inner)
    assert (timer.seconds, timer.calls) == (0.0, 0)   # wrapping calls nothing

    timed.get(b"a")
    timed.multi_get([b"a", b"b"])
    timed.scan_ranges([(b"a", b"b")])
    timed.scan_prefixes([b"a"])
    timed.write(puts=[(b"e", b"7")], version=4)
    assert (timer.seconds, timer.calls) == (5.0, 5)

    entries = timed.scan(b"b")   # opening the scan: one call; each step through it, one tick
    assert (timer.seconds, timer.calls) == (6.0, 6)
    assert next(entries) == (b"b", b"3") and timer.seconds == 7.0
    assert list(entries) == [(b"ba", b"4"), (b"c", b"5"), (b"e", b"7")]
    assert timer.seconds == 11.0 and timer.calls == 6   # three entries and the end

    timed.memo()   # not a call into the store's data
    assert (timer.seconds, timer.calls) == (11.0, 6)


def test_timed_store_counts_a_call_that_raises(inner, clock):
    timer = StoreTimer()
    with pytest.raises(StoreError):
        timer.wrap(inner).scan_prefixes([b"a", 1])
    assert (timer.seconds, timer.calls) == (1.0, 1)


def test_timed_store_wrappers_sharing_a_timer_add_up(inner):
    timer = StoreTimer()
    for _ in range(2):
        assert list(timer.wrap(inner).scan()) == ENTRIES
    assert timer.calls == 2 and timer.seconds > 0
    alone = TimedStore(inner)
    alone.get(b"a")
    assert alone.timer is not timer and alone.timer.calls == 1 and timer.calls == 2
