"""A rule-based state machine drives a store and a dict model side by side, for every backend.

Rules: put, delete, range delete, a combined multi-write with a version, a write that fails
half-way (a bad entry or a raising source: nothing may be left behind), scans and prefix scans in
both directions, batched range and prefix scans, multi-gets, close + reopen, and a hand-over + reopen. After every step the whole store must equal the
model, version marker included. The backend under test is passed in (as zarr does), so one
machine covers them all.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Iterator

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from streamjoin.statestore import Store, StoreWriteError
from tests.statestore.conftest import BACKENDS, Backend

# A small alphabet so keys collide, share prefixes and sit at the 0x00 / 0xff edges; the empty key;
# and long keys (several hundred bytes to a few KB) that extend one another and the short ones.
short_keys = st.lists(st.sampled_from([0x00, 0x01, 0x61, 0xFE, 0xFF]), min_size=0, max_size=3).map(bytes)
LONG_BASES = [b"a" * 480, b"a" * 479 + b"\xfe", b"a" * 600, b"\xff" * 3000]
long_keys = st.tuples(st.sampled_from(LONG_BASES), short_keys).map(b"".join)
keys = st.one_of(short_keys, long_keys)
bounds = st.none() | keys
values = st.binary(max_size=6)
pairs = st.tuples(keys, values)
versions = st.none() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
BAD_ENTRIES = {
    "puts": [(b"a", "text"), (b"a", None), (1, b"v"), (b"a", b"v", b"w")],
    "deletes": ["text", 7, None],
    "delete_ranges": [(b"a", "z"), ("a", b"z"), (b"a",)],
}


class SourceFailed(Exception):
    """Raised by a put source half-way through a write."""


def failing_source(items: list[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    yield from items
    raise SourceFailed("the source of puts broke half-way")


class StoreMachine(RuleBasedStateMachine):
    """The store under test against ``model`` (a dict) and ``version`` (the expected marker)."""

    def __init__(self, backend: Backend, scratch: str) -> None:
        super().__init__()
        self.backend = backend
        self.path = tempfile.mkdtemp(dir=scratch)
        self.store: Store = backend.open(self.path)
        self.model: dict[bytes, bytes] = {}
        self.version: int | None = None

    def teardown(self) -> None:
        self.store.close()
        self.backend.destroy(self.path)
        shutil.rmtree(self.path, ignore_errors=True)

    def expected(self, start: bytes | None, end: bytes | None, reverse: bool) -> list[tuple[bytes, bytes]]:
        chosen = sorted(k for k in self.model if (start is None or k >= start) and (end is None or k < end))
        return [(k, self.model[k]) for k in (reversed(chosen) if reverse else chosen)]

    def apply(self, puts, deletes, ranges, version) -> None:
        for start, end in ranges:
            for key in [k for k in self.model if start <= k < end]:
                del self.model[key]
        for key in deletes:
            self.model.pop(key, None)
        self.model.update(puts)
        if version is not None:
            self.version = version

    @rule(key=keys, value=values)
    def put(self, key: bytes, value: bytes) -> None:
        self.store.write(puts=[(key, value)])
        self.apply([(key, value)], [], [], None)

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        self.store.write(deletes=[key])
        self.apply([], [key], [], None)

    @rule(start=keys, end=keys)
    def delete_range(self, start: bytes, end: bytes) -> None:
        self.store.write(delete_ranges=[(start, end)])
        self.apply([], [], [(start, end)], None)

    @rule(
        puts=st.lists(pairs, max_size=8), deletes=st.lists(keys, max_size=4),
        ranges=st.lists(st.tuples(keys, keys), max_size=2), version=versions,
    )
    def multi_write(self, puts, deletes, ranges, version) -> None:
        self.store.write(puts=puts, deletes=deletes, delete_ranges=ranges, version=version)
        self.apply(puts, deletes, ranges, version)

    @rule(
        puts=st.lists(pairs, min_size=1, max_size=6), deletes=st.lists(keys, max_size=3),
        field=st.sampled_from(sorted(BAD_ENTRIES)), data=st.data(), version=versions,
    )
    def write_with_bad_entry(self, puts, deletes, field, data, version) -> None:
        write = {"puts": list(puts), "deletes": list(deletes), "delete_ranges": [(b"\x00", b"\x01")]}
        bad = data.draw(st.sampled_from(BAD_ENTRIES[field]), label="bad entry")
        where = data.draw(st.integers(0, len(write[field])), label="position")
        write[field].insert(where, bad)
        with pytest.raises(StoreWriteError):
            self.store.write(**write, version=version)

    @rule(puts=st.lists(pairs, min_size=1, max_size=6), deletes=st.lists(keys, max_size=3), version=versions)
    def write_from_failing_source(self, puts, deletes, version) -> None:
        with pytest.raises(SourceFailed):
            self.store.write(puts=failing_source(puts), deletes=deletes, version=version)

    @rule(start=bounds, end=bounds, reverse=st.booleans())
    def scan(self, start, end, reverse) -> None:
        assert list(self.store.scan(start, end, reverse)) == self.expected(start, end, reverse)

    @rule(start=bounds, end=bounds)
    def scan_columns(self, start, end) -> None:
        chunks = [(keys.to_pylist(), values.to_pylist()) for keys, values in self.store.scan_columns(start, end)]
        assert [kv for keys, values in chunks for kv in zip(keys, values)] == self.expected(start, end, False)

    @rule(prefix=st.binary(max_size=2) | keys, reverse=st.booleans())
    def scan_prefix(self, prefix: bytes, reverse: bool) -> None:
        want = [kv for kv in self.expected(None, None, reverse) if kv[0].startswith(prefix)]
        assert list(self.store.scan_prefix(prefix, reverse)) == want

    @rule(ranges=st.lists(st.tuples(bounds, bounds), max_size=5))
    def scan_ranges(self, ranges: list[tuple[bytes | None, bytes | None]]) -> None:
        assert self.store.scan_ranges(ranges) == [self.expected(start, end, False) for start, end in ranges]

    @rule(prefixes=st.lists(st.binary(max_size=2) | keys, max_size=5))
    def scan_prefixes(self, prefixes: list[bytes]) -> None:
        everything = self.expected(None, None, False)
        want = [[kv for kv in everything if kv[0].startswith(p)] for p in prefixes]
        assert self.store.scan_prefixes(prefixes) == want

    @rule(wanted=st.lists(keys, max_size=6))
    def multi_get(self, wanted: list[bytes]) -> None:
        assert self.store.multi_get(wanted) == [self.model.get(k) for k in wanted]

    @rule()
    def close_and_reopen(self) -> None:
        self.store.close()
        self.store = self.backend.open(self.path)

    @rule()
    def hand_over_and_reopen(self) -> None:
        """Closed for another process's open (the arranged kinds leave their delta and codes)."""
        stats = self.store.stats()
        self.store.hand_over()
        self.store = self.backend.open(self.path)
        if stats.exact or getattr(self.store, "keeps_history", False):   # (RocksDB's estimates move)
            assert self.store.stats() == stats

    @precondition(lambda self: not self.model)
    @rule(items=st.dictionaries(keys, values, max_size=8), version=versions)
    def load_sorted(self, items: dict[bytes, bytes], version) -> None:
        assert self.store.load_sorted(sorted(items.items()), version) == len(items)
        self.apply(sorted(items.items()), [], [], version)

    @invariant()
    def store_equals_model(self) -> None:
        assert list(self.store.scan()) == self.expected(None, None, False)
        assert self.store.version == self.version


@pytest.mark.parametrize("backend", BACKENDS, ids=lambda b: b.name)
def test_store_machine_matches_dict_model(backend: Backend, tmp_path) -> None:
    _run_machine(backend, str(tmp_path))


def _run_machine(backend: Backend, scratch: str) -> None:
    run_state_machine_as_test(lambda: StoreMachine(backend, scratch), settings=settings(settings(), stateful_step_count=25))


@pytest.mark.parametrize("backend", [b for b in BACKENDS if b.name.startswith("arranged")], ids=lambda b: b.name)
def test_store_machine_merging_by_bytes_matches_dict_model(backend: Backend, tmp_path, monkeypatch) -> None:
    """The arranged kinds with a merge due once the delta holds a few bytes (``MERGE_BYTES``):
    merges by bytes between every kind of write, reopen and hand-over keep the model."""
    from streamjoin.statestore import arranged

    monkeypatch.setattr(arranged, "MERGE_BYTES", 24)
    _run_machine(backend, str(tmp_path))
