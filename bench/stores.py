"""``streamjoin bench stores``: store operations per second per backend, beside the raw library.

For each backend that keeps one library entry per state entry (rocksdb-kv, lmdb-kv, memory) and each operation (batched put, get, multi-get, prefix
scan, full scan) the same work runs through our :class:`streamjoin.statestore.Store` and through the raw
library call: rocksdict's ``Rdict`` in raw mode, py-lmdb, and a plain dict with a sorted key list
for memory. Reads run on the same open database (the raw calls use the store's own handle), so
data and caches are shared; puts go into fresh empty stores. Ours and raw alternate within each
repeat so machine noise hits both; the table shows medians and the ratio ours/raw.

Rates count entries: a put or get of one entry is one op, a multi-get of 100 keys is 100 ops, and
a scan yielding 10 entries is 10 ops.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import time
from collections import deque
from itertools import starmap, takewhile
from typing import Any, Callable, Iterable, cast

from streamjoin.bench.harness import Chart, Table, results_dir, write_results
from streamjoin.statestore import Store, destroy_store, open_store
from streamjoin.statestore.base import prefix_end

__all__ = ["add_arguments", "run"]

_DRAIN: Callable[[Iterable[object]], None] = deque[object](maxlen=0).extend  # consume an iterator at C speed, the same way on both sides
BACKENDS = ("rocksdb-kv", "lmdb-kv", "memory")
Op = Callable[[], object]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--entries", type=int, default=200_000, help="entries in the store (default 200,000)")
    parser.add_argument("--value-size", type=int, default=100, help="bytes per value (default 100)")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each measurement (default 5)")
    parser.add_argument("--batch", type=int, default=1000, help="entries per batched put (default 1000)")
    parser.add_argument("--group", type=int, default=10, help="entries per prefix (default 10)")
    parser.add_argument("--stores", default=",".join(BACKENDS), help="backends to run (default all)")


class Workload:
    """The keys and values every backend gets: ``group`` entries share each 8-byte prefix."""

    def __init__(self, entries: int, value_size: int, batch: int, group: int) -> None:
        rng = random.Random(20240607)
        groups = max(1, entries // group)
        self.prefixes = [b"p%07d" % g for g in range(groups)]
        keys = [p + b"/%04d" % i for p in self.prefixes for i in range(group)]
        value = bytes(value_size)
        items = [(k, value) for k in keys]
        rng.shuffle(items)  # puts arrive in no particular order
        self.items = items
        self.batches = [items[i : i + batch] for i in range(0, len(items), batch)]
        self.sorted_items = sorted(items)
        self.get_keys = rng.sample(keys, min(len(keys), 100_000))
        self.multi_batches = [self.get_keys[i : i + 100] for i in range(0, len(self.get_keys), 100)]
        rng.shuffle(self.prefixes)
        # held: rocksdict points into them; never None (no prefix ends in 0xff)
        self.ends = cast("list[bytes]", [prefix_end(p) for p in self.prefixes])
        self.scan_entries = len(self.prefixes) * group


# -- the raw side, per library ----------------------------------------------------------------------


def raw_rocksdb(store: Store, path: str, w: Workload) -> dict[str, tuple[Op, Op | None]]:
    """Raw rocksdict calls: (timed op, untimed setup) per operation."""
    from rocksdict import Options, Rdict, ReadOptions, WriteBatch

    from streamjoin.statestore.rocksdb import RocksDBStore

    assert isinstance(store, RocksDBStore), store
    db = store._db  # the store's own handle: same data, same caches
    state: dict[str, Rdict] = {}

    def fresh() -> None:
        if "db" in state:
            state.pop("db").close()
        shutil.rmtree(path, ignore_errors=True)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        state["db"] = Rdict(path, options)

    def put() -> None:
        target = state["db"]
        for chunk in w.batches:
            batch = WriteBatch(raw_mode=True)
            _DRAIN(starmap(batch.put, chunk))
            target.write(batch)

    def prefix_scans() -> None:
        for start, end in zip(w.prefixes, w.ends):
            options = ReadOptions()
            options.set_iterate_upper_bound(end)
            _DRAIN(db.items(from_key=start, read_opt=options))

    return {
        "batched put": (put, fresh),
        "get": (lambda: _DRAIN(map(db.get, w.get_keys)), None),
        # rocksdict's stubs take a list of any keys (invariant), not list[bytes]; a list of bytes is one
        "multi-get": (lambda: _DRAIN(map(cast("Callable[[list[bytes]], object]", db.get), w.multi_batches)), None),
        "prefix scan": (prefix_scans, None),
        "full scan": (lambda: _DRAIN(db.items()), None),
    }


def raw_lmdb(store: Store, path: str, w: Workload) -> dict[str, tuple[Op, Op | None]]:
    """Raw py-lmdb calls, one transaction per call as a caller would write them."""
    import lmdb

    from streamjoin.statestore.lmdb import LMDBStore

    assert isinstance(store, LMDBStore), store
    env, data = store._env, store._data
    state: dict[str, Any] = {}  # the fresh environment and its database

    def fresh() -> None:
        if "env" in state:
            state.pop("env").close()
        shutil.rmtree(path, ignore_errors=True)
        fresh_env = lmdb.open(path, map_size=1 << 30, max_dbs=2, metasync=False, readahead=False)
        state["env"], state["db"] = fresh_env, fresh_env.open_db(b"data")

    def put() -> None:
        target, db = state["env"], state["db"]
        for chunk in w.batches:
            with target.begin(write=True, db=db) as txn:
                txn.cursor().putmulti(chunk)

    def get() -> None:
        with env.begin(db=data) as txn:
            _DRAIN(map(txn.get, w.get_keys))

    def multi_get() -> None:
        for keys in w.multi_batches:
            with env.begin(db=data) as txn:
                _DRAIN(map(txn.get, keys))

    def prefix_scans() -> None:
        for start, end in zip(w.prefixes, w.ends):
            with env.begin(db=data) as txn:
                cursor = txn.cursor()
                if cursor.set_range(start):
                    in_prefix = takewhile((end,).__gt__, cursor.iternext())
                    _DRAIN(in_prefix)

    def full_scan() -> None:
        with env.begin(db=data) as txn:
            _DRAIN(txn.cursor().iternext())

    return {
        "batched put": (put, fresh), "get": (get, None), "multi-get": (multi_get, None),
        "prefix scan": (prefix_scans, None), "full scan": (full_scan, None),
    }


def raw_memory(store: Store, path: str, w: Workload) -> dict[str, tuple[Op, Op | None]]:
    """A plain dict and a sorted key list: the floor for an in-process ordered map."""
    import bisect

    items = dict(w.sorted_items)
    keys = sorted(items)
    state: dict[str, dict] = {}

    def put() -> None:
        target = state["d"]
        for chunk in w.batches:
            target.update(chunk)

    def prefix_scans() -> None:
        for start, end in zip(w.prefixes, w.ends):
            lo, hi = bisect.bisect_left(keys, start), bisect.bisect_left(keys, end)
            _DRAIN((k, items[k]) for k in keys[lo:hi])

    return {
        "batched put": (put, lambda: state.update(d={})),
        "get": (lambda: _DRAIN(map(items.get, w.get_keys)), None),
        "multi-get": (lambda: _DRAIN(list(map(items.get, b)) for b in w.multi_batches), None),
        "prefix scan": (prefix_scans, None),
        "full scan": (lambda: _DRAIN((k, items[k]) for k in keys), None),
    }


RAW = {"rocksdb-kv": raw_rocksdb, "lmdb-kv": raw_lmdb, "memory": raw_memory}


# -- our side ------------------------------------------------------------------------------------------


def ours(kind: str, root: str, store: Store, w: Workload) -> dict[str, tuple[Op, Op | None]]:
    """The same operations through the Store interface."""
    put_path = os.path.join(root, f"{kind}-put")
    state: dict[str, Store] = {}

    def fresh() -> None:
        if "s" in state:
            state.pop("s").close()
        destroy_store(kind, put_path)
        state["s"] = open_store(kind, put_path)

    def put() -> None:
        write = state["s"].write
        for chunk in w.batches:
            write(puts=chunk)

    def multi_get() -> None:
        for keys in w.multi_batches:
            store.multi_get(keys)

    def prefix_scans() -> None:
        for start in w.prefixes:
            _DRAIN(store.scan_prefix(start))

    def cleanup() -> None:
        if "s" in state:
            state.pop("s").close()
        destroy_store(kind, put_path)

    ops: dict[str, tuple[Op, Op | None]] = {
        "batched put": (put, fresh), "get": (lambda: _DRAIN(map(store.get, w.get_keys)), None),
        "multi-get": (multi_get, None), "prefix scan": (prefix_scans, None),
        "full scan": (lambda: _DRAIN(store.scan()), None),
    }
    ops["_cleanup"] = (cleanup, None)
    return ops


# -- running ---------------------------------------------------------------------------------------------


def _alternating(ours_op: tuple[Op, Op | None], raw_op: tuple[Op, Op | None], repeat: int) -> tuple[float, float]:
    """Median seconds of ours and raw, run alternately ``repeat`` times each."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for _ in range(max(1, repeat)):
        for side, (fn, setup) in enumerate((ours_op, raw_op)):
            if setup is not None:
                setup()
            start = time.perf_counter()
            fn()
            times[side].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def _counts(w: Workload) -> dict[str, int]:
    return {
        "batched put": len(w.items), "get": len(w.get_keys), "multi-get": len(w.get_keys),
        "prefix scan": w.scan_entries, "full scan": len(w.items),
    }


def bench_backend(kind: str, root: str, w: Workload, repeat: int, table: Table) -> None:
    path = os.path.join(root, kind)
    destroy_store(kind, path)
    store = open_store(kind, path)
    raw_path = os.path.join(root, f"{kind}-raw-put")
    try:
        store.load_sorted(w.sorted_items, version=0)
        ours_ops, raw_ops = ours(kind, root, store, w), RAW[kind](store, raw_path, w)
        for name, count in _counts(w).items():
            mine, theirs = _alternating(ours_ops[name], raw_ops[name], repeat)
            table.add(kind, name, count / mine, count / theirs, theirs / mine)
        ours_ops["_cleanup"][0]()
    finally:
        store.close()
        destroy_store(kind, path)
        shutil.rmtree(raw_path, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    kinds = [k.strip() for k in args.stores.split(",") if k.strip()]
    unknown = sorted(set(kinds) - set(BACKENDS))
    if unknown:
        raise SystemExit(f"streamjoin bench stores: unknown store(s) {unknown}; choose from {BACKENDS}")
    root = os.path.join(results_dir(), "stores")
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    w = Workload(args.entries, args.value_size, args.batch, args.group)
    table = Table(["backend", "operation", "ours ops/s", "raw ops/s", "ours/raw"])
    for kind in kinds:
        bench_backend(kind, root, w, args.repeat, table)
    print(table.render())
    print(f"\n{args.entries:,} entries of {args.value_size} B; puts in batches of {args.batch}; "
          f"prefix scans of {args.group}; medians of {args.repeat} alternating runs.")
    chart = Chart(value="ours ops/s", label=("backend", "operation"),
                  title="store operations/s through the Store interface", log=True)
    print("results:", write_results("stores", table, vars(args) | {"func": None}, chart=chart))
    shutil.rmtree(root, ignore_errors=True)
    return 0
