"""Shared benchmark harness: timing with medians, tables, and a results file.

Benchmarks measure the thing and its comparison side by side in one run (this machine is shared
and noisy), repeat each measurement, and report medians and ratios.
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Sequence, TypeVar

from streamjoin.bench.environment import huge_pages

T = TypeVar("T")

__all__ = ["median_seconds", "Table", "Chart", "results_dir", "write_results", "parse_stores", "key_stages",
           "key_stage_variant", "parse_key_stage_variant", "KEY_STAGE_MODES", "stage_modes", "mode_variant",
           "parse_mode_variant",
           "format_value", "load_warning", "warn_if_busy", "BUSY_LOAD_PER_CPU", "AnonPeak", "rotated",
           "resident_pages", "peak_resident"]


def rotated(variants: Sequence[T], run: int) -> list[T]:
    """The variants in the order of timed run ``run``: rotated by one each run, so each takes
    every place in turn (a streaming query that follows another one runs measurably slower: in a
    run of q3, q20 and q8w on 2026-11-30, whichever streamjoin store ran first after Spark's join
    took 0.6-2.6 s longer, whichever store it was)."""
    at = run % len(variants) if variants else 0
    return [*variants[at:], *variants[:at]]


def median_seconds(fn: Callable[[], object], repeat: int, setup: Callable[[], object] | None = None) -> float:
    """Median wall time of ``fn()`` over ``repeat`` runs; ``setup()`` runs untimed before each."""
    times = []
    for _ in range(max(1, repeat)):
        if setup is not None:
            setup()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class _Peak(threading.Thread):
    """The largest value of ``_read()`` (bytes) while the ``with`` block runs: sampled every
    ``interval`` seconds, and at its end (``peak_bytes``)."""

    def __init__(self, interval: float) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak_bytes = self._read()
        self._stop_event = threading.Event()

    def _read(self) -> int:
        raise NotImplementedError

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            self.peak_bytes = max(self.peak_bytes, self._read())

    def __enter__(self: _P) -> _P:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop_event.set()
        self.join()
        self.peak_bytes = max(self.peak_bytes, self._read())


_P = TypeVar("_P", bound=_Peak)


class AnonPeak(_Peak):
    """This process's anonymous resident memory (resident less the pages of mapped files, which
    the operating system can drop: ``resident_pages``), sampled every ``interval`` seconds while the
    ``with`` block runs; ``growth`` is its largest rise over the value at the start, in bytes
    (0 where ``/proc`` does not say). Memory the allocators keep free (Arrow's pool, the C
    library's heap) is handed back first, so what an earlier measurement freed is not reused
    unseen."""

    def __init__(self, interval: float = 0.005) -> None:
        _release_free_memory()
        super().__init__(interval)
        self.start_bytes = self.peak_bytes

    def _read(self) -> int:
        return _anon_bytes()

    @property
    def growth(self) -> int:
        return max(0, self.peak_bytes - self.start_bytes)


class ResidentPeak(_Peak):
    """This process's largest resident memory while the ``with`` block runs (sampled every
    ``interval`` seconds, and at its end): what a benchmark run in process reports beside its
    figures as a Python worker's peak memory. Memory an earlier block left resident counts too."""

    def __init__(self, interval: float = 0.05) -> None:
        super().__init__(interval)

    def _read(self) -> int:
        return resident_pages(os.getpid())[0]


def _release_free_memory() -> None:
    import ctypes

    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    try:
        ctypes.CDLL(None).malloc_trim(0)   # the C library this process links
    except (OSError, AttributeError):   # not glibc
        pass


def _anon_bytes() -> int:
    """This process's anonymous resident bytes (0: not known)."""
    resident, files = resident_pages(os.getpid())
    return resident - files


def resident_pages(pid: int) -> tuple[int, int]:
    """A process's resident bytes, and those of them backed by files (``/proc/<pid>/statm``;
    0, 0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/statm") as fh:
            fields = fh.read().split()
        page = os.sysconf("SC_PAGE_SIZE")
        return int(fields[1]) * page, int(fields[2]) * page
    except (OSError, IndexError, ValueError):
        return 0, 0


def peak_resident() -> int:
    """This process's largest resident bytes since it started its program (``VmHWM`` of
    ``/proc/self/status``; 0 where it cannot be read). Not ``ru_maxrss``: Linux keeps that across
    ``fork`` and ``exec``, so a child started by a large process reports the parent's size."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except (OSError, IndexError, ValueError):
        pass
    return 0


@dataclass
class Table:
    """A plain-text table: ``add(row)`` then ``render()``; numbers are right-aligned."""

    columns: Sequence[str]
    rows: list[list[object]] = field(default_factory=list)

    def add(self, *row: object) -> None:
        self.rows.append(list(row))

    def render(self) -> str:
        cells = [[_fmt(v) for v in row] for row in self.rows]
        widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        numeric = [all(isinstance(r[i], (int, float)) for r in self.rows) if self.rows else False for i in range(len(self.columns))]
        def line(values: Sequence[str]) -> str:
            return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(values, widths, numeric))
        out = [line(list(self.columns)), "  ".join("-" * w for w in widths)]
        out += [line(r) for r in cells]
        return "\n".join(out)

    def as_records(self) -> list[dict[str, object]]:
        return [dict(zip(self.columns, row)) for row in self.rows]


@dataclass(frozen=True)
class Chart:
    """How a results table is drawn.

    ``kind="bars"`` (comparisons): one horizontal bar a row, labelled by the ``label`` columns
    (joined with " / "), its length the ``value`` column; rows whose value is not a number are left out.
    ``kind="line"`` (a series over time or size): the column ``x`` on the horizontal axis, one line per
    distinct ``label`` (no ``label``: one line), one panel for ``value`` and one for each of ``also``.
    Every chart's title adds where and when the figures were measured (CPUs, machine, date).
    """

    value: str
    label: tuple[str, ...]
    title: str
    log: bool = False                 # a logarithmic value axis, for values orders of magnitude apart
    kind: str = "bars"                # "bars" or "line"
    x: str | None = None              # the line chart's horizontal axis (a column)
    also: tuple[str, ...] = ()        # the line chart's further panels (columns)


def format_value(value: object) -> str:
    """A table cell as the benchmarks print it: thousands separators, 2-3 significant digits."""
    return _fmt(value)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    if isinstance(value, int):
        return f"{value:,d}"
    return str(value)


def results_dir() -> str:
    """Where benchmarks write scratch data: under the system's temporary directory."""
    path = os.path.join(tempfile.gettempdir(), "streamjoin-bench")
    os.makedirs(path, exist_ok=True)
    return path


def write_results(name: str, table: Table, params: dict[str, object], chart: Chart | None = None,
                  directory: str | None = None, notes: Sequence[str] = ()) -> str:
    """Save a run's table, parameters, command and the load average as it ends as JSON (under
    ``directory``, by default :func:`results_dir`) and, with ``chart``, its PNG beside it; return the JSON's path.

    ``streamjoin bench report`` turns the newest of these into the documentation's benchmark tables and charts.
    Without matplotlib (the ``bench`` extra) the chart is skipped, saying so.
    """
    directory = directory or results_dir()
    os.makedirs(directory, exist_ok=True)
    stem = os.path.join(directory, f"{name}-{time.strftime('%Y%m%dT%H%M%S')}")
    results = {
        "benchmark": name, "command": _command(name), "date": time.strftime("%Y-%m-%d"),
        "params": {k: v for k, v in params.items() if not callable(v)}, "machine": platform.platform(),
        "cpus": os.cpu_count(), "load": _load(), "columns": list(table.columns), "rows": table.as_records(),
        "notes": list(notes), "chart": asdict(chart) if chart else None, "huge_pages": huge_pages(),
    }
    with open(stem + ".json", "w") as fh:
        json.dump(results, fh, indent=2, default=str)
    if chart is not None:
        try:
            from streamjoin.bench.charts import draw
        except ImportError:
            print("no chart: matplotlib is missing (pip install '/path/to/streamjoin[bench]')", file=sys.stderr)
        else:
            draw(results, stem + ".png")
    return stem + ".json"


#: above this many times the CPU count, the 1-minute load average makes figures unreliable
BUSY_LOAD_PER_CPU = 1.5


def load_warning(load: Sequence[float] | None = None, cpus: int | None = None) -> str | None:
    """A warning naming the machine's 1-minute load average when it is above
    :data:`BUSY_LOAD_PER_CPU` times the CPU count (``load``, ``cpus``: as measured here when None),
    else None (also where the system has no load average)."""
    load = _load() if load is None else load
    cpus = cpus or os.cpu_count() or 1
    if not load or load[0] <= BUSY_LOAD_PER_CPU * cpus:
        return None
    return (f"streamjoin bench: the machine is busy: load average {load[0]:.2f} on {cpus} CPUs (above "
            f"{BUSY_LOAD_PER_CPU * cpus:.1f}); figures measured now are slower and vary more than on a quiet machine")


def warn_if_busy(load: Sequence[float] | None = None, cpus: int | None = None) -> bool:
    """Print :func:`load_warning` to stderr when there is one; return whether there was."""
    warning = load_warning(load, cpus)
    if warning:
        print(warning, file=sys.stderr)
    return warning is not None


def _load() -> list[float] | None:
    """The machine's 1-, 5- and 15-minute load averages as the run ends (None where the system has none)."""
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def _command(name: str) -> str:
    """The command line that ran this benchmark, as a user types it."""
    args = sys.argv[1:]
    if name in args:
        return shlex.join(["streamjoin", *args[args.index(name) - 1:]]) if args.index(name) else \
            shlex.join(["streamjoin", "bench", *args])
    return f"streamjoin bench {name}"


#: The table join's plans a ``--key-stages`` option names: the first is the default, its variant
#: names bare, the others' end in ``-<mode>``.
KEY_STAGE_MODES = ("fused", "three")


def stage_modes(text: str, modes: Sequence[str] = KEY_STAGE_MODES) -> list[str]:
    """The plans a ``--key-stages`` option names (comma-separated, from ``modes``); exits naming
    a bad value."""
    chosen = [m for m in text.split(",") if m]
    if not chosen or set(chosen) - set(modes):
        raise SystemExit(f"--key-stages takes one or more of {', '.join(modes)} (comma-separated), not {text!r}")
    return chosen


def mode_variant(name: str, mode: str, modes: Sequence[str] = KEY_STAGE_MODES) -> str:
    """A variant's name with its plan: ``-<mode>`` after it, nothing for the default (``modes[0]``)."""
    return name if mode == modes[0] else f"{name}-{mode}"


def parse_mode_variant(name: str, modes: Sequence[str] = KEY_STAGE_MODES) -> tuple[str, str]:
    """(the name without its plan, the plan): :func:`mode_variant` undone."""
    for mode in modes[1:]:
        if name.endswith(f"-{mode}"):
            return name.removesuffix(f"-{mode}"), mode
    return name, modes[0]


def key_stages(text: str) -> list[bool]:
    """A ``--key-stages`` option (``fused``, the product's default for a new checkpoint, ``three``
    or both, comma-separated): per mode, whether the table join's key stages are fused
    (``fuse_key_stages``); exits naming a bad value. A three-stage variant's name ends in ``-three``."""
    return [m == "fused" for m in stage_modes(text)]


def key_stage_variant(name: str, fused: bool) -> str:
    """A variant's name with its key stages: ``-three`` after it when they are not fused."""
    return mode_variant(name, "fused" if fused else "three")


def parse_key_stage_variant(name: str) -> tuple[str, bool]:
    """(the name without ``-three``, whether its key stages are fused): :func:`key_stage_variant` undone."""
    name, mode = parse_mode_variant(name)
    return name, mode == "fused"


#: Stores the benchmarks name beyond the store kinds, as (kind, options): the arranged store with
#: its manifest and runs held in LMDB or RocksDB (``host=``, ``streamjoin.statestore.hosts``).
HOSTED_STORES: dict[str, tuple[str, dict[str, Any]]] = {
    "arranged-lmdb": ("arranged", {"host": "lmdb"}), "arranged-rocksdb": ("arranged", {"host": "rocksdb"})}
#: How a ``--stores`` help names them.
HOSTED_HELP = "arranged-lmdb or arranged-rocksdb (the arranged store on LMDB or RocksDB: host=)"


def store_spec(name: str) -> tuple[str, dict[str, Any]]:
    """The store kind and options of a benchmark's store name (a kind, or one of :data:`HOSTED_STORES`)."""
    kind, options = HOSTED_STORES.get(name, (name, {}))
    return kind, dict(options)


def parse_stores(text: str, known: Sequence[str]) -> list[str]:
    """The comma-separated store names of a ``--stores`` option (``known``, any other kind
    ``open_store`` knows, e.g. ``arranged``, or one of :data:`HOSTED_STORES`); exits naming any
    unknown one."""
    from streamjoin.statestore.registry import backend_names

    chosen = [s for s in text.split(",") if s]
    unknown = sorted(set(chosen) - set(known) - set(backend_names()) - set(HOSTED_STORES))
    if unknown:
        raise SystemExit(f"unknown stores {unknown}; choose from {','.join(dict.fromkeys([*known, *backend_names()]))}")
    return chosen
