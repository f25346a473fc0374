"""What the arranged backend does beyond the store contract (which its suites check): its
history of previous versions, its compaction and its checks of the files it reads."""

from __future__ import annotations

import os

import pytest

from streamjoin.statestore import StoreCorruptError, open_store
from streamjoin.statestore.arranged import HISTORY


def _write_versions(path: str, versions: int, per_version: int) -> list[dict[bytes, bytes]]:
    """Versions 0.. of ``per_version`` puts each (and one delete), the state after each."""
    states: list[dict[bytes, bytes]] = []
    state: dict[bytes, bytes] = {}
    with open_store("arranged", path) as store:
        for v in range(versions):
            puts = [(b"k%06d" % (v * 7 + i), b"v%d" % v) for i in range(per_version)]
            deletes = [b"k%06d" % (v * 3)]
            store.tag = 1000 + v
            store.write(puts, deletes, version=v)
            state.pop(deletes[0], None)
            state.update(puts)
            states.append(dict(state))
    return states


@pytest.mark.parametrize("per_version", [3, 5000], ids=["runs", "bases"])
def test_arranged_roll_back_returns_to_a_kept_version(tmp_path, per_version: int) -> None:
    path = str(tmp_path / "s")
    states = _write_versions(path, 6, per_version)   # 5000 puts a version compact into a new base each time
    with open_store("arranged", path) as store:
        assert dict(store.scan()) == states[5]
        assert store.applied_tag(5) == 1005 and store.applied_tag(4) == 1004
        assert store.roll_back(5 - HISTORY - 1) is None   # older than the history: nothing changes
        assert store.version == 5
        assert store.roll_back(4) == 1
        assert (dict(store.scan()), store.version) == (states[4], 4)
    with open_store("arranged", path) as store:   # the manifest says so too
        assert (dict(store.scan()), store.version) == (states[4], 4)
        store.forget_history()
        assert store.roll_back(3) is None


def test_arranged_open_removes_files_no_manifest_names_and_refuses_a_torn_one(tmp_path) -> None:
    path = str(tmp_path / "s")
    states = _write_versions(path, 3, 10)
    stopped = ("run-99999999.arrow", "base-99999998.arrow", "base-99999998.keys", "MANIFEST.new")
    for name in stopped:   # a write, a merge and a manifest that stopped before the manifest was replaced
        with open(os.path.join(path, name), "wb") as f:
            f.write(b"partial")
    with open_store("arranged", path) as store:
        assert dict(store.scan()) == states[2]
    assert not set(stopped) & set(os.listdir(path))
    newest = max(name for name in os.listdir(path) if name.endswith(".arrow"))
    with open(os.path.join(path, newest), "r+b") as f:
        f.seek(-3, os.SEEK_END)
        f.write(b"xyz")
    with pytest.raises(StoreCorruptError, match=f"{newest} fails its checksum"):
        open_store("arranged", path)


def test_arranged_load_sorted_takes_a_restores_chunks_as_columns(tmp_path) -> None:
    import pyarrow as pa

    from streamjoin.statestore import StoreError
    from streamjoin.statestore.chunks import SortedChunks
    from streamjoin.statestore.errors import StoreWriteError

    items = [(bytes([i // 7, i % 7]) * (1 + i % 3), b"v%d" % i) for i in range(60)]
    items.sort()
    chunks = SortedChunks((pa.array([k for k, _ in items[i:i + 16]], pa.large_binary() if i % 32 else pa.binary()),
                           pa.array([v for _, v in items[i:i + 16]], pa.binary())) for i in range(0, 60, 16))
    with open_store("arranged", str(tmp_path / "a")) as store:
        assert store.load_sorted(chunks, version=3) == 60
        assert list(store.scan()) == items and store.version == 3
    with open_store("arranged", str(tmp_path / "a")) as store:   # the base file reads back
        assert list(store.scan()) == items
    with open_store("arranged", str(tmp_path / "b")) as store:
        with pytest.raises(StoreError, match=r"strictly ascending, but b'a' follows b'b'"):
            store.load_sorted(SortedChunks([(pa.array([b"b"]), pa.array([b"1"])), (pa.array([b"a"]), pa.array([b"2"]))]))
        with pytest.raises(StoreWriteError, match="null"):
            store.load_sorted(SortedChunks([(pa.array([b"a", b"b"]), pa.array([b"1", None]))]))
        assert list(store.scan()) == [] and store.version is None


def _set_format(path: str, format: str) -> None:
    import json

    manifest = os.path.join(path, "MANIFEST")
    with open(manifest) as f:
        meta = json.load(f)
    meta["format"] = format
    with open(manifest, "w") as f:
        json.dump(meta, f)


def test_arranged_store_of_an_earlier_format_is_refused_as_damaged(tmp_path) -> None:
    path = str(tmp_path / "s")
    _write_versions(path, 1, 3)
    _set_format(path, "arranged-1")   # what streamjoin wrote before its bases were memory-mapped
    with pytest.raises(StoreCorruptError,
                       match="its format is 'arranged-1' where this streamjoin reads 'arranged-2', 'arranged-3'"):
        open_store("arranged", path)


def test_arranged_store_of_format_2_is_read_as_it_is_and_written_as_format_3(tmp_path) -> None:
    """``arranged-2`` (before a run could be a delta with range deletes) differs from
    ``arranged-3`` only in runs it never wrote: read as it is; its next write says ``arranged-3``."""
    import json

    path = str(tmp_path / "s")
    _write_versions(path, 1, 3)
    with open_store("arranged", path) as store:
        before = list(store.scan())
    _set_format(path, "arranged-2")
    with open_store("arranged", path) as store:
        assert list(store.scan()) == before
        store.write([(b"new", b"1")], version=store.version + 1)
    with open(os.path.join(path, "MANIFEST")) as f:
        assert json.load(f)["format"] == "arranged-3"


def test_arranged_reopen_applies_its_runs_as_written_in_order(tmp_path) -> None:
    """A reopened store applies the runs since its base as one write: a key's last entry across
    the runs counts (put, deleted, put again; put over a base key, then deleted), and a run with
    range deletes still applies between the runs before and after it."""
    path = str(tmp_path / "s")
    state: dict[bytes, bytes] = {}
    base = [(b"b%05d" % i, b"base") for i in range(5000)]   # more than a run holds: a base
    writes: list[tuple[list, list, list]] = [
        (base, [], []),
        ([(b"x", b"1"), (b"b00001", b"over")], [b"b00002"], []),
        ([(b"y", b"1")], [b"x", b"b00001"], []),
        ([(b"x", b"2")], [b"y"], [(b"b00010", b"b00020")]),
        ([(b"b00015", b"back"), (b"z", b"1")], [b"b00003"], []),
        ([(b"b00002", b"again")], [b"z"], []),
    ]
    with open_store("arranged", path) as store:
        for v, (puts, deletes, ranges) in enumerate(writes):
            store.write(puts, deletes, ranges, version=v)
            for start, end in ranges:
                state = {k: val for k, val in state.items() if not start <= k < end}
            for key in deletes:
                state.pop(key, None)
            state.update(puts)
        assert len([f for f in os.listdir(path) if f.startswith("run-")]) == 5   # one base, then runs
        assert dict(store.scan()) == state
    with open_store("arranged", path) as store:
        assert dict(store.scan()) == state and store.version == len(writes) - 1
        assert store.multi_get([b"x", b"y", b"z", b"b00001", b"b00002", b"b00015", b"b00012"]) == \
            [b"2", None, None, None, b"again", b"back", None]


def _handed_store(path: str) -> tuple[dict[bytes, bytes], list[bytes]]:
    """A store of a base, runs beside it (puts over base keys, deletes of base and run keys) and
    the base's codes made, handed over; its entries and some keys to read."""
    from streamjoin.statestore.arranged import ArrangedStore

    store = ArrangedStore(path)
    base = [(b"a%06d" % i, b"base%d" % i) for i in range(20000)]
    store.load_sorted(base, 0)
    store.write([(b"a%06d" % i, b"one") for i in range(0, 2000, 7)] + [(b"b1", b"x")], [b"a000003"], version=1)
    store.write([(b"b2", b"y")], [b"b1", b"a000014"], version=2)
    assert store._layers.base.codes is not None and len(store._layers.delta)   # coded base, changes beside it
    entries = dict(store.scan())
    store.stats()   # (counts the base's bytes, as a task's metrics do)
    store.hand_over()
    return entries, [b"a000000", b"a000003", b"a000007", b"a000014", b"a019999", b"b1", b"b2", b"c"]


def test_arranged_store_handed_over_opens_as_the_state_it_left(tmp_path) -> None:
    """A hand-over leaves the delta, the base's codes and its byte count; the next open takes
    them (the file removed), reads as a cold open does, and writes and merges on from there."""
    from streamjoin.statestore.arranged import ArrangedStore
    from streamjoin.statestore.handover import NAME

    path = str(tmp_path / "s")
    entries, probe = _handed_store(path)
    assert os.path.exists(os.path.join(path, NAME))
    store = ArrangedStore(path)
    assert not os.path.exists(os.path.join(path, NAME))
    assert store._layers.base.made_codes is not None and "nbytes" in store._layers.base.__dict__
    cold_path = str(tmp_path / "cold")
    _handed_store(cold_path)
    os.remove(os.path.join(cold_path, NAME))
    with ArrangedStore(cold_path) as cold:
        assert cold._layers.base.made_codes is None   # read from its files: nothing carried
        assert dict(store.scan()) == dict(cold.scan()) == entries
        assert store.multi_get(probe) == cold.multi_get(probe) == [entries.get(k) for k in probe]
        assert store.stats() == cold.stats() and store.version == cold.version == 2
    store.write([(b"a%06d" % i, b"two") for i in range(20000)], [], version=3)   # a merge
    entries.update({b"a%06d" % i: b"two" for i in range(20000)})
    store.close()
    with ArrangedStore(path) as again:
        assert dict(again.scan()) == entries and again.version == 3


@pytest.mark.parametrize("damage", ["stale", "flipped", "cut"])
def test_arranged_store_reads_its_files_past_a_handover_it_cannot_trust(tmp_path, damage) -> None:
    """A hand-over of another state (the store wrote on after it), one with a byte flipped and a
    torn one are passed over (and removed): the open reads the files."""
    from streamjoin.statestore.arranged import ArrangedStore
    from streamjoin.statestore.handover import NAME

    path = str(tmp_path / "s")
    entries, probe = _handed_store(path)
    handover = os.path.join(path, NAME)
    with open(handover, "rb") as f:
        data = f.read()
    if damage == "stale":
        with ArrangedStore(path) as store:
            store.write([(b"b3", b"z")], [b"a000000"], version=3)
        entries[b"b3"] = b"z"
        del entries[b"a000000"]
    elif damage == "flipped":
        data = data[:100] + bytes([data[100] ^ 1]) + data[101:]
    else:
        data = data[:len(data) // 2]
    with open(handover, "wb") as f:
        f.write(data)
    with ArrangedStore(path) as store:
        assert not os.path.exists(handover)
        assert store._layers.base.made_codes is None   # nothing taken from the file
        assert dict(store.scan()) == entries
        assert store.multi_get(probe) == [entries.get(k) for k in probe]


def _current(store) -> list[str]:
    """The kinds of the files the store's current state is made of (``base`` twice, then ``run``s)."""
    return [name.split("-")[0] for name, _, _ in store._now.files]


def _runs_past_the_share(store, base: int, slack: float) -> tuple[int, dict[bytes, bytes]]:
    """Versions 1.. of runs until they hold more than the merge share of a base of ``base``
    entries and at most ``slack`` times it; the last version and what it wrote."""
    from streamjoin.statestore.arranged import RUN_SHARE

    share, step, v, state = int(base * RUN_SHARE), int(base * RUN_SHARE) // 2 + 1, 0, {}
    while v * step <= share:
        v += 1
        puts = [(b"r%06d" % (v * step + i), b"%d" % v) for i in range(step)]
        store.write(puts, version=v)
        state.update(puts)
    assert v * step <= share * slack
    return v, state


def test_arranged_kept_warm_leaves_a_due_merge_to_flush_idle(tmp_path) -> None:
    """A store kept open between tasks (``idle_work_follows``) writes runs past the share that
    makes a merge (up to ``IDLE_SLACK`` times it); ``flush_idle`` merges them into a new base at
    the same version, with the same entries and history, and a reopened store reads the same."""
    from streamjoin.statestore.arranged import IDLE_SLACK, ArrangedStore

    path = str(tmp_path / "s")
    base = [(b"b%06d" % i, b"base") for i in range(40_000)]
    with ArrangedStore(path) as store:
        store.write(base, version=0)
        store.idle_work_follows()
        v, runs = _runs_past_the_share(store, len(base), IDLE_SLACK)
        assert _current(store) == ["base", "base"] + ["run"] * v   # no write merged
        store.flush_idle()
        assert _current(store) == ["base", "base"]
        assert store.version == v and dict(store.scan()) == dict(base) | runs
    with ArrangedStore(path) as store:
        assert store.version == v and dict(store.scan()) == dict(base) | runs
        assert store.roll_back(v - 1) == 1   # the versions before the merge are still there
        before = {k: val for k, val in runs.items() if val != b"%d" % v}
        assert store.version == v - 1 and dict(store.scan()) == dict(base) | before


def test_arranged_merges_in_the_write_unless_kept_warm_or_beyond_the_slack(tmp_path) -> None:
    from streamjoin.statestore.arranged import IDLE_SLACK, RUN_SHARE, ArrangedStore

    base = [(b"b%06d" % i, b"base") for i in range(40_000)]
    with ArrangedStore(str(tmp_path / "cold")) as store:   # not kept warm: the write merges
        store.write(base, version=0)
        _runs_past_the_share(store, len(base), IDLE_SLACK)
        assert _current(store) == ["base", "base"]   # the write past the share merged
    with ArrangedStore(str(tmp_path / "warm")) as store:   # kept warm, but the runs outgrow the slack
        store.write(base, version=0)
        store.idle_work_follows()
        big = [(b"r%06d" % i, b"x") for i in range(int(len(base) * RUN_SHARE * IDLE_SLACK) + 1)]
        store.write(big, version=1)
        assert _current(store) == ["base", "base"]
        store.flush_idle()   # nothing left to do
        assert _current(store) == ["base", "base"] and dict(store.scan()) == dict(base) | dict(big)


def test_arranged_store_of_large_values_merges_by_their_bytes(tmp_path) -> None:
    """A few hundred entries of large values (an enrichment's buckets) make a merge by their
    bytes: beside no base, once the delta holds more than ``MERGE_BYTES``; beside a base, once
    it holds more than ``RUN_SHARE`` of the base's bytes. Small values merge by their entries."""
    from streamjoin.statestore.arranged import MERGE_BYTES, RUN_SHARE, ArrangedStore

    value = 64 * 1024
    with ArrangedStore(str(tmp_path / "large")) as store:
        below = MERGE_BYTES // value - 2
        store.write([(b"k%04d" % i, b"a" * value) for i in range(below)], version=0)
        assert _current(store) == ["run"]   # under MERGE_BYTES: a run
        store.write([(b"k%04d" % i, b"b" * value) for i in range(below, 300)], version=1)
        assert _current(store) == ["base", "base"]   # past it: merged, with 300 entries
        per_version = int(300 * RUN_SHARE) // 3 + 1   # new keys, a third of the base's share a version
        for v in (2, 3):
            store.write([(b"n%04d" % (v * 100 + i), b"%d" % v * value) for i in range(per_version)], version=v)
            assert _current(store) == ["base", "base"] + ["run"] * (v - 1)
        store.write([(b"n%04d" % (400 + i), b"z" * value) for i in range(per_version)], version=4)
        assert _current(store) == ["base", "base"]   # past the share of the base's bytes: merged
        assert store.get(b"k0000") == b"a" * value and store.get(b"n0200") == b"2" * value
        assert store.version == 4 and len(dict(store.scan())) == 300 + 3 * per_version
    with ArrangedStore(str(tmp_path / "small")) as store:
        store.write([(b"k%05d" % i, b"v") for i in range(4000)], version=0)
        assert _current(store) == ["run"]   # 4,000 small entries: under MERGE_ENTRIES, far under MERGE_BYTES


def test_arranged_kept_warm_leaves_a_merge_by_bytes_to_flush_idle(tmp_path) -> None:
    """A store kept open between tasks leaves a merge its delta's bytes call for to
    ``flush_idle``, however far past the share (a bootstrap's load of large values)."""
    from streamjoin.statestore.arranged import MERGE_BYTES, ArrangedStore

    value = 64 * 1024
    entries = [(b"k%04d" % i, b"a" * value) for i in range(4 * MERGE_BYTES // value)]
    with ArrangedStore(str(tmp_path / "s")) as store:
        store.idle_work_follows()
        store.write(entries, version=0)
        assert _current(store) == ["run"]
        store.flush_idle()
        assert _current(store) == ["base", "base"] and store.version == 0 and dict(store.scan()) == dict(entries)
