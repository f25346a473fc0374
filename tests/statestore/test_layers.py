"""The arranged store's two layers (:mod:`streamjoin.statestore.layers`: a base mapped from files,
a delta in memory) against a dict model, with keys longer and shorter than the base's width; and
the arranged store's memory budget."""

from __future__ import annotations

import os
from dataclasses import replace

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.statestore import StoreArgumentError, open_store
from streamjoin.statestore.arranged import BUDGET_VARIABLE, worker_budget
from streamjoin.statestore.arrangement import decode_keys
from streamjoin.statestore.layers import Layers
from streamjoin.statestore.sorted_base import SortedBase

_KEYS = st.sampled_from([b"", b"\x00", b"a", b"a\x00", b"ab", b"\xff", b"\xff\x00"]) | st.binary(max_size=9)
_WRITE = st.tuples(
    st.lists(st.tuples(_KEYS, st.binary(max_size=3)), max_size=8),
    st.lists(_KEYS, max_size=4),
    st.lists(st.tuples(_KEYS, _KEYS), max_size=2),
    st.booleans(),   # merge into a new base after the write
)


def _remapped(layers: Layers, directory: str, n: int) -> Layers:
    """``layers`` merged into a new base written to ``directory`` and mapped back, with the key
    codes the merge carried where it could (the old base's are made first, so that it can)."""
    _ = layers.base.codes   # made now where they can be
    ((data, _, _), (keys, _, _)), carried = layers.write_coded_base(directory, f"base-{n}", sync=False)
    base = SortedBase.mapped(*(pa.memory_map(os.path.join(directory, f)).read_buffer() for f in (keys, data)))
    made = carried.bind(base.ekeys) if carried is not None else None
    return Layers(replace(base, made=made) if made is not None else base)


def _apply(model: dict[bytes, bytes], puts, deletes, ranges) -> dict[bytes, bytes]:
    for start, end in ranges:
        model = {k: v for k, v in model.items() if not start <= k < end}
    for key in deletes:
        model.pop(key, None)
    return {**model, **dict(puts)}


def _check_stats(layers: Layers) -> None:
    """``stats()`` and the delta's kept counts of tombstones, against a pass over the delta."""
    base, d = layers.base, layers.delta
    keys, values = decode_keys(d.ekeys).to_pylist(), d.log.take(d.rows).to_pylist()
    tombs = [k for k, v in zip(keys, values) if v is None]
    live = sum(len(k) + len(v) for k, v in zip(keys, values) if v is not None)
    assert (d.nulls, d.null_key_bytes) == (len(tombs), sum(map(len, tombs)))
    assert d.nbytes == live + sum(map(len, tombs))
    entries, size, exact = Layers(base, d).stats()   # (a new one: ``len`` of ``layers`` made it exact)
    if len(base) and len(d):   # the estimate: a delta entry over a base entry counts twice
        assert (entries, size, exact) == (len(base) + len(keys) - 2 * len(tombs), base.nbytes + live, False)
    else:
        assert (entries, size, exact) == (len(layers), layers.nbytes, True)


@given(st.lists(_WRITE, max_size=8), st.lists(_KEYS, max_size=10),
       st.lists(st.tuples(st.none() | _KEYS, st.none() | _KEYS), max_size=4))
def test_layers_reads_equal_a_dict_across_merges(tmp_path_factory, writes, probes, ranges) -> None:
    directory = str(tmp_path_factory.mktemp("layers"))
    layers, model = Layers(), {}
    for n, (puts, deletes, delete_ranges, merge) in enumerate(writes):
        layers = layers.applied_columns(pa.array([k for k, _ in puts], pa.binary()), pa.array([v for _, v in puts], pa.binary()),
                                        pa.array(deletes, pa.binary()), delete_ranges)
        model = _apply(model, puts, deletes, delete_ranges)
        if merge:
            layers = _remapped(layers, directory, n)
            assert not len(layers.delta)
        assert list(layers.entries(None, None, False)) == sorted(model.items())
        assert list(layers.entries(None, None, True)) == sorted(model.items(), reverse=True)
        assert (len(layers), layers.nbytes) == (len(model), sum(len(k) + len(v) for k, v in model.items()))
        _check_stats(layers)
        scanned = Layers(layers.base, layers.delta)   # a whole scan leaves its count as the length
        assert _pairs(scanned.columns(None, None)) == sorted(model.items())
        assert "_live" not in scanned.__dict__ and len(scanned) == len(model)
    assert layers.get_many(probes) == [model.get(k) for k in probes]
    in_range = [[(k, v) for k, v in sorted(model.items()) if (s is None or s <= k) and (e is None or k < e)]
                for s, e in ranges]
    assert layers.scan_ranges(ranges) == in_range
    assert [list(layers.entries(s, e, False)) for s, e in ranges] == in_range
    assert [_pairs(layers.columns(s, e)) for s, e in ranges] == in_range
    prefixes = [p[:3] for p in probes]
    assert layers.scan_prefixes(prefixes) == [[(k, v) for k, v in sorted(model.items()) if k.startswith(p)]
                                              for p in prefixes]


def test_layers_entries_of_a_base_of_many_chunks_keep_the_delta_between_them(tmp_path) -> None:
    keys = [b"%07d" % i for i in range(0, 300_000, 2)]
    layers = _remapped(Layers().applied_columns(pa.array(keys, pa.binary()), pa.array(keys, pa.binary()),
                                                pa.array([], pa.binary())), str(tmp_path), 0)
    odd = [b"%07d" % i for i in range(1, 300_000, 20_001)]
    layers = layers.applied_columns(pa.array(odd, pa.binary()), pa.array(odd, pa.binary()), pa.array([keys[5]], pa.binary()))
    expected = sorted({*keys, *odd} - {keys[5]})
    assert [k for k, _ in layers.entries(None, None, False)] == expected
    assert [k for k, _ in layers.entries(b"0100000", None, True)] == [k for k in reversed(expected) if k >= b"0100000"]
    chunks = list(layers.columns(b"0000100", b"0290000"))
    assert len(chunks) > 1
    assert [k for k, _ in _pairs(chunks)] == [k for k in expected if b"0000100" <= k < b"0290000"]


def _pairs(chunks) -> list[tuple[bytes, bytes]]:
    """Chunks of keys and values as (key, value) pairs."""
    return [pair for keys, values in chunks for pair in zip(keys.to_pylist(), values.to_pylist())]


def test_arranged_store_keeps_its_changes_in_memory_under_its_budget(tmp_path) -> None:
    budget = 64 * 1024
    path = str(tmp_path / "s")
    model: dict[bytes, bytes] = {}
    with open_store("arranged", path, memory_budget=budget) as store:
        for v in range(40):   # the state grows to 8 times the budget
            puts = [(b"k%05d" % ((v * 613 + i * 7) % 20_000), b"v%d-%d" % (v, i) * 4) for i in range(500)]
            deletes = [b"k%05d" % ((v * 31 + i) % 20_000) for i in range(50)]
            store.write(puts, deletes, version=v)
            model = _apply(model, puts, deletes, [])
            assert store._layers.delta_bytes <= budget
        assert dict(store.scan()) == model
        stats = store.stats()
        if len(store._layers.delta):   # both layers hold entries: an estimate
            assert not stats.exact and len(model) <= stats.entries <= 2 * len(model)
        else:
            assert stats.exact and stats.entries == len(model)
        assert len(store._layers) == len(model) and len(store._layers.base) > len(model) // 2
        assert store._layers.nbytes > 5 * budget
    with open_store("arranged", path, memory_budget=budget) as store:
        assert dict(store.scan()) == model and store.version == 39


def test_arranged_store_budget_is_refused_unless_a_size(tmp_path, monkeypatch) -> None:
    with pytest.raises(StoreArgumentError, match="memory_budget must be a whole number of bytes"):
        open_store("arranged", str(tmp_path / "s"), memory_budget="1g")
    monkeypatch.setenv(BUDGET_VARIABLE, "512m")
    assert worker_budget() == 512 << 20
    monkeypatch.setenv(BUDGET_VARIABLE, "lots")
    with pytest.raises(StoreArgumentError, match="STREAMJOIN_WORKER_MEMORY='lots'.*e.g. 512m"):
        open_store("arranged", str(tmp_path / "s"))


def test_layers_merge_carries_the_base_key_codes_to_the_new_base(tmp_path) -> None:
    def key(tag: bytes, a: int) -> bytes:
        return tag + (a | 1 << 63).to_bytes(8, "big")

    def write(layers: Layers, puts: list[bytes], deletes: list[bytes]) -> Layers:
        return layers.applied_columns(pa.array(puts, pa.binary()), pa.array([p[::-1] for p in puts], pa.binary()),
                                      pa.array(deletes, pa.binary()))

    first = [key(t, a) for t in (b"L", b"R") for a in range(0, 4000, 2)]
    layers = _remapped(write(Layers(), first, []), str(tmp_path), 0)
    model = {k: k[::-1] for k in first}
    assert layers.base.codes is not None   # made, so that the next merge carries them
    for n, (puts, deletes, carries) in enumerate([
        ([key(b"L", a) for a in range(1, 3000, 6)], [key(b"R", a) for a in range(0, 400, 4)], True),
        ([key(b"R", 5), key(b"L", 3999)], [key(b"L", 0)], True),
        ([key(b"L", 7_000_000)], [], False),   # a byte the area's keys agree in: coded again from its keys
        ([key(b"R", 7)], [key(b"R", 5)], True),
        ([b"M" + bytes(8)], [], False),        # an area the base has not
    ], start=1):
        layers = _remapped(write(layers, puts, deletes), str(tmp_path), n)
        model = {**{k: v for k, v in model.items() if k not in deletes}, **{p: p[::-1] for p in puts}}
        assert (layers.base.made is not None) == carries
        probes = [*model, key(b"L", 3), key(b"R", 1), b"L", b"Z"]
        assert layers.get_many(probes) == [model.get(p) for p in probes]
        assert list(layers.entries(None, None, False)) == sorted(model.items())
        assert layers.scan_prefixes([b"L", b"R"]) == [sorted((k, v) for k, v in model.items() if k[:1] == t)
                                                      for t in (b"L", b"R")]
        assert layers.base.codes is not None   # made, for the next merge
