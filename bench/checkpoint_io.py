"""``streamjoin bench checkpoint-io``: file-system calls and seconds per task as partitions grow.

Runs the runtime in this process (``run_task`` over every partition, as the Spark layer and
``LocalRunner`` do) with the ``PassThrough`` operator, its checkpoint and changelogs on a
``pyarrow.fs`` filesystem that adds a fixed latency to every call (default 20 ms, what an object
store answers in) and counts the calls. What a task pays for its checkpoint must not grow with
the partition count: before the watermark was kept in one record, every task read every partition's progress record to
compute the watermark (P tasks x P reads a micro-batch).

The first micro-batch (a new join) is not measured; the figures are medians over the others, per
partition (= per task) and micro-batch. ``--latency 0`` counts calls without waiting (fast).
"""

from __future__ import annotations

import argparse
import collections
import os
import statistics
import tempfile
import time
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs

from streamjoin.bench.harness import Chart, Table, write_results

__all__ = ["add_arguments", "run", "SlowFileSystem", "counted"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--partitions", default="16,64,200", help="partition counts (default 16,64,200)")
    parser.add_argument("--batches", type=int, default=3, help="micro-batches, the first not measured (default 3)")
    parser.add_argument("--rows", type=int, default=2_000, help="rows per micro-batch (default 2,000)")
    parser.add_argument("--latency", type=float, default=0.020, help="seconds added to every file-system "
                        "call (default 0.020; 0 counts calls only)")
    parser.add_argument("--store", default="memory", help="local store backend (default memory)")


class SlowFileSystem(pafs.FileSystemHandler):
    """A local directory tree seen through a handler that sleeps ``latency`` s per call and counts
    calls by name (opening a file is one call; reading or writing its bytes is part of it)."""

    def __init__(self, latency: float) -> None:
        self.inner = pafs.LocalFileSystem()
        self.latency = latency
        self.calls: collections.Counter[str] = collections.Counter()

    def _call(self, name: str) -> None:
        self.calls[name] += 1
        if self.latency:
            time.sleep(self.latency)

    def get_type_name(self) -> str:
        return "slow"

    def normalize_path(self, path: str) -> str:
        return path

    def equals(self, other: Any) -> bool:
        return other is self

    def get_file_info(self, paths: list[str]) -> list[pafs.FileInfo]:
        self._call("get_file_info")
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector: pafs.FileSelector) -> list[pafs.FileInfo]:
        self._call("list")
        return self.inner.get_file_info(selector)

    def create_dir(self, path: str, recursive: bool) -> None:
        self._call("create_dir")
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path: str) -> None:
        self._call("delete_dir")
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path: str, missing_dir_ok: bool = False) -> None:
        self._call("delete_dir")
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self) -> None:
        raise NotImplementedError("refused: deleting the root directory's contents")

    def delete_file(self, path: str) -> None:
        self._call("delete_file")
        self.inner.delete_file(path)

    def move(self, src: str, dest: str) -> None:
        self._call("move")
        self.inner.move(src, dest)

    def copy_file(self, src: str, dest: str) -> None:
        self._call("copy")
        self.inner.copy_file(src, dest)

    def open_input_stream(self, path: str) -> Any:
        self._call("read")
        return self.inner.open_input_stream(path)

    def open_input_file(self, path: str) -> Any:
        self._call("read")
        return self.inner.open_input_file(path)

    def open_output_stream(self, path: str, metadata: Any) -> Any:
        self._call("write")
        return self.inner.open_output_stream(path)

    def open_append_stream(self, path: str, metadata: Any) -> Any:
        self._call("write")
        return self.inner.open_append_stream(path)


class counted:
    """Context: checkpoints and changelogs made inside it live on ``handler``'s filesystem."""

    def __init__(self, handler: SlowFileSystem) -> None:
        self.fs = pafs.PyFileSystem(handler)

    def __enter__(self) -> "counted":
        from streamjoin.changelog import log as log_module

        self._log_module = log_module
        self._open_storage = log_module.open_storage
        fs = self.fs

        def slow_storage(uri: Any, filesystem: Any = None, *, sync: bool = True) -> Any:
            return self._open_storage(uri, filesystem or fs, sync=sync)

        log_module.open_storage = slow_storage
        return self

    def __exit__(self, *exc: object) -> None:
        self._log_module.open_storage = self._open_storage


def _batches(rows: int, count: int) -> Iterator[pa.Table]:
    rng = np.random.default_rng(14)
    for b in range(count):
        yield pa.table({
            "k": pa.array(rng.integers(0, 10_000, rows), pa.int64()),
            "t": pa.array(b * 1_000_000 + np.arange(rows, dtype=np.int64), pa.timestamp("us", tz="UTC")),
        })


def measure(partitions: int, batches: int, rows: int, latency: float, store: str) -> dict[str, float]:
    """Median calls and seconds per task of micro-batches 2..n over ``partitions`` partitions."""
    from streamjoin.bench.operators import PassThrough
    from streamjoin.runtime.local import LocalRunner
    from streamjoin.runtime.options import StateConfig

    handler = SlowFileSystem(latency)
    with tempfile.TemporaryDirectory(prefix="streamjoin-ckio-") as scratch, counted(handler) as slow:
        data = list(_batches(rows, batches))
        op = PassThrough(data[0].schema, ["k"], "t")
        config = StateConfig(store=store, local_dir=os.path.join(scratch, "local"))
        runner = LocalRunner(op, os.path.join(scratch, "ck"), partitions=partitions, config=config)
        runner.checkpoint.files.fs = slow.fs
        calls, seconds = [], []
        for index, table in enumerate(data):
            before = sum(handler.calls.values())
            started = time.perf_counter()
            runner.run(table)
            if index:
                seconds.append((time.perf_counter() - started) / partitions)
                calls.append((sum(handler.calls.values()) - before) / partitions)
    return {"calls": statistics.median(calls), "seconds": statistics.median(seconds)}


def run(args: argparse.Namespace) -> int:
    counts = [int(p) for p in args.partitions.split(",") if p]
    table = Table(["partitions", "calls / task", "s / task", "s / micro-batch"])
    for partitions in counts:
        found = measure(partitions, args.batches, args.rows, args.latency, args.store)
        table.add(partitions, found["calls"], found["seconds"], found["seconds"] * partitions)
        print(f"{partitions} partitions: {found['calls']:.1f} calls, {found['seconds']:.3f} s per task", flush=True)
    print(f"{args.rows:,} rows a micro-batch, {args.latency * 1000:g} ms a call, {args.store} stores, "
          f"medians of micro-batches 2..{args.batches}")
    print(table.render())
    notes = [f"{args.latency * 1000:g} ms added to every file-system call (checkpoint records and changelogs); "
             "calls and seconds are per task (one partition of one micro-batch); in-process, PassThrough operator",
             "flat as partitions grow: a task reads the watermark inputs of all partitions with one listing"]
    print("results:", write_results("checkpoint-io", table, vars(args) | {"func": None}, notes=notes,
                                    chart=Chart(value="calls / task", label=(), kind="line", x="partitions",
                                                also=("s / task",),
                                                title="checkpoint I/O: file-system calls and seconds per task by partition count")))
    return 0
