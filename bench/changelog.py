"""``streamjoin bench changelog``: changelog append and restore rates, beside raw bulk loading.

For each size (``--entries``, default 1M and 5M) it writes one log of random 16-byte keys and
100-byte values as ``--deltas`` appends (the append rate), then measures, per backend, in one run:

* ``raw bulk load``: the library's own sorted loader on a ready Python list of fresh objects laid
  out in key order (RocksDB: SstFileWriter + ingest; LMDB: ``putmulti(append=True)`` in one
  transaction), the ceiling for any restore, which must also read files and make those objects;
* ``store.load_sorted``: the backend's bulk path through the store interface, from the same list;
* ``restore compacted``: ``restore`` from the log after ``compact`` (one snapshot);
* ``restore uncompacted``: ``restore`` from the deltas alone (folded in Arrow, then bulk-loaded).

Rates are entries per second of the final state, medians of ``--repeat`` runs; "% raw" compares
with the raw bulk load of the same backend in the same run. "peak anon +MB" is how far this
process's anonymous resident memory rose above its level at the start of a measurement's runs
(sampled every 5 ms: a store's own buffers and a library's, not the pages of mapped files, which
the operating system can drop): what a restore costs a worker's memory beyond the state it reads. "peak
RSS MB", for the restores, is the whole peak resident memory of a new Python process that runs the
same restore once more after the timed runs (its imports included, as a Python worker that
restores a partition has them; the benchmark's own lists of entries are not in it). The goals are
in :data:`streamjoin.bench.goals.GOALS`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
from functools import partial
from typing import Callable

import lmdb
import pyarrow as pa
from rocksdict import IngestExternalFileOptions, Options, Rdict, SstFileWriter

from streamjoin.bench.harness import (
    HOSTED_HELP,
    AnonPeak,
    Chart,
    Table,
    median_seconds,
    results_dir,
    store_spec,
    write_results,
)
from streamjoin.changelog import Changelog, compact, restore
from streamjoin.statestore import Store, destroy_store, open_store

__all__ = ["add_arguments", "run"]

KEY_BYTES = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Write a changelog of random entries as --deltas appends, compact a copy of it, then per backend "
        "time the library's raw bulk load, the store's load_sorted and a restore from each log (medians of "
        "--repeat runs). 'peak anon +MB' is how far this process's anonymous memory rose during a "
        "measurement; 'peak RSS MB' is the peak resident memory of a new Python process that runs the "
        "same restore once more, as a worker restoring a partition would. The defaults take about 7 "
        "minutes on 2 cores; try --entries 100000 first.")
    parser.add_argument("--entries", default="1000000,5000000",
                        help="comma-separated state sizes in entries (default: 1000000,5000000)")
    parser.add_argument("--backends", default="arranged,lmdb,rocksdb,lmdb-kv,rocksdb-kv",
                        help=f"comma-separated store kinds, or {HOSTED_HELP} "
                             "(default: arranged,lmdb,rocksdb,lmdb-kv,rocksdb-kv)")
    parser.add_argument("--value-bytes", type=int, default=100, help="value size (default: 100)")
    parser.add_argument("--deltas", type=int, default=10,
                        help="deltas the uncompacted log is written as (default: 10)")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement (median)")
    parser.add_argument("--seed", type=int, default=7, help="seed of the random keys and values")


def run(args: argparse.Namespace) -> int:
    table = Table(["entries", "backend", "what", "seconds", "entries/s", "% raw", "peak anon +MB", "peak RSS MB"])
    scratch = os.path.join(results_dir(), "changelog")
    for entries in (int(n) for n in args.entries.split(",")):
        shutil.rmtree(scratch, ignore_errors=True)
        items = _items(entries, args.value_bytes, args.seed)
        logs = _write_logs(scratch, items, args, table)
        ordered = _fresh_sorted(items)
        for backend in args.backends.split(","):
            _measure_backend(table, backend, ordered, logs, scratch, args.repeat)
        del items, ordered
    shutil.rmtree(scratch, ignore_errors=True)
    print(table.render())
    path = write_results("changelog", table, vars(args) | {"func": None},
                         chart=Chart(value="entries/s", label=("entries", "backend", "what"),
                                     title="changelog entries/s (append, compact, restore)", log=True))
    print(f"\nresults: {path}")
    return 0


def _items(entries: int, value_bytes: int, seed: int) -> list[tuple[bytes, bytes]]:
    """Distinct random keys in random order, each with a value cut at a random offset of one
    random 1 MiB blob (values need not be distinct; only their size matters here)."""
    rnd = random.Random(seed)
    blob, span = rnd.randbytes(1 << 20), (1 << 20) - value_bytes
    keys: dict[bytes, None] = {}
    while len(keys) < entries:
        chunk = rnd.randbytes(min(entries - len(keys), 1 << 20) * KEY_BYTES)
        keys.update(dict.fromkeys(chunk[i:i + KEY_BYTES] for i in range(0, len(chunk), KEY_BYTES)))
    offsets = [rnd.randrange(span) for _ in range(entries)]
    return [(k, blob[o:o + value_bytes]) for k, o in zip(keys, offsets)]


def _fresh_sorted(items: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``items`` sorted, as new objects allocated in key order (as a restore decodes them), so the
    raw loaders are not slowed by reading objects scattered over the heap."""
    keys, values = zip(*sorted(items))
    as_arrow = (pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary()))
    return list(zip(as_arrow[0].to_pylist(), as_arrow[1].to_pylist()))


def _write_logs(scratch: str, items: list, args: argparse.Namespace, table: Table) -> dict[str, Changelog]:
    """The uncompacted log (timed appends) and a compacted copy (timed compaction)."""
    entries, per = len(items), -(-len(items) // args.deltas)
    plain = Changelog(os.path.join(scratch, "uncompacted"))

    def append_all() -> None:
        for version in range(args.deltas):
            plain.append(version, items[version * per:(version + 1) * per])

    with AnonPeak() as memory:
        seconds = median_seconds(append_all, 1, setup=lambda: shutil.rmtree(plain.uri, ignore_errors=True))
    table.add(entries, "-", f"append ({args.deltas} deltas)", seconds, entries / seconds, "", _mb(memory), "-")
    compacted = Changelog(os.path.join(scratch, "compacted"))
    shutil.copytree(plain.uri, compacted.uri)
    with AnonPeak() as memory:
        stats = compact(compacted)
    table.add(entries, "-", "compact (deltas -> snapshot)", stats.seconds, entries / stats.seconds, "", _mb(memory), "-")
    return {"compacted": compacted, "uncompacted": plain}


def _measure_backend(table: Table, backend: str, ordered: list, logs: dict[str, Changelog],
                     scratch: str, repeat: int) -> None:
    path = os.path.join(scratch, f"store-{backend}")
    fresh = lambda: destroy_store(store_spec(backend)[0], path)  # noqa: E731 - untimed set-up
    measured: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        ("raw bulk load", _raw_loader(backend, ordered, path), lambda: shutil.rmtree(path, True)),
        ("store.load_sorted", lambda: _load(backend, path, ordered), fresh),
        *((f"restore {name}", partial(_restore, backend, path, log), fresh) for name, log in logs.items())]
    rows = []
    for what, fn, setup in measured:
        with AnonPeak() as memory:
            rows.append((what, median_seconds(fn, repeat, setup), _mb(memory)))
    resident = {}
    for name, log in logs.items():
        fresh()
        resident[f"restore {name}"] = round(_restore_peak(backend, path, log) / (1 << 20))
    raw = rows[0][1]
    for what, seconds, peak in rows:
        table.add(len(ordered), backend, what, seconds, len(ordered) / seconds, 100.0 * raw / seconds, peak,
                  resident.get(what, "-"))
    fresh()


#: one restore in a new Python process that imports what a worker's restore does, not the benchmark
#: (argv: store kind, its options as JSON, store path, changelog uri); prints its peak resident bytes
_CHILD = ("import json, sys; from streamjoin.changelog import Changelog, restore; "
          "from streamjoin.statestore import open_store; from streamjoin.bench.harness import peak_resident; "
          "store = open_store(sys.argv[1], sys.argv[3], **json.loads(sys.argv[2])); "
          "restore(Changelog(sys.argv[4]), store); store.close(); "
          "print(json.dumps({'peak': peak_resident()}))")


def _restore_peak(backend: str, path: str, log: Changelog) -> int:
    """The peak resident bytes of a new Python process that restores ``log`` into a fresh store of
    ``backend`` at ``path`` (what a worker that restores the partition holds, imports included)."""
    kind, options = store_spec(backend)
    found = subprocess.run([sys.executable, "-c", _CHILD, kind, json.dumps(dict(options)), path, log.uri],
                           check=True, capture_output=True, text=True)
    return int(json.loads(found.stdout.strip().splitlines()[-1])["peak"])


def _mb(memory: AnonPeak) -> float:
    return memory.growth / (1 << 20)


def _open(backend: str, path: str) -> Store:
    kind, options = store_spec(backend)
    return open_store(kind, path, **options)


def _load(backend: str, path: str, ordered: list) -> None:
    with _open(backend, path) as store:
        store.load_sorted(ordered, version=0)


def _restore(backend: str, path: str, log: Changelog) -> None:
    with _open(backend, path) as store:
        restore(log, store)


def _raw_loader(backend: str, ordered: list, path: str) -> Callable[[], None]:
    """The library's own sorted bulk load of ``ordered`` into a new database at ``path``: the
    backend's library, or its host's for the arranged store on another host (``store_spec``)."""
    kind, options = store_spec(backend)
    loaders = {"rocksdb": _raw_rocksdb, "lmdb": _raw_lmdb, "arranged": _raw_arrow,
               "rocksdb-kv": _raw_rocksdb, "lmdb-kv": _raw_lmdb}
    loader = loaders.get(options.get("host", kind))
    if loader is None:
        raise SystemExit(f"bench changelog: no raw bulk loader for backend {backend!r} "
                         f"({', '.join(loaders)}, or {HOSTED_HELP})")
    return lambda: loader(ordered, path)


def _raw_rocksdb(ordered: list, path: str) -> None:
    os.makedirs(path)
    options = Options(raw_mode=True)
    writer = SstFileWriter(options)
    sst = os.path.join(path, "load.sst")
    writer.open(sst)
    for key, value in ordered:
        writer[key] = value
    writer.finish()
    db = Rdict(os.path.join(path, "db"), options)
    ingest = IngestExternalFileOptions()
    ingest.set_move_files(True)
    db.ingest_external_file([sst], ingest)
    db.close()


def _raw_arrow(ordered: list, path: str) -> None:
    """The arranged store's floor: the sorted entries as one Arrow IPC file, written and synced."""
    os.makedirs(path)
    table = pa.table({"key": pa.array([k for k, _ in ordered], pa.large_binary()),
                      "value": pa.array([v for _, v in ordered], pa.large_binary())})
    with open(os.path.join(path, "base.arrow"), "wb") as sink:
        with pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        sink.flush()
        os.fsync(sink.fileno())


def _raw_lmdb(ordered: list, path: str) -> None:
    env = lmdb.open(path, map_size=1 << 40, subdir=True)
    with env.begin(write=True) as txn:
        txn.cursor().putmulti(ordered, append=True)
    env.close()
