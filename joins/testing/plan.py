"""A streaming run's plan: which micro-batch each input row arrives in, and what disturbs the run.

A ``RunPlan`` assigns every row of every input a micro-batch (rows keep their order: an
input's rows arrive in the order given, cut into consecutive micro-batches; several inputs cut at
different places interleave). It also picks the run's partition count and store backend, an
optional restart with the local state lost before one micro-batch, an optional micro-batch
executed twice, and the order in which the run's output rows reach ``finish`` (a sink receives a
streaming query's rows in no defined order: the output's rows are shuffled by a seed, so that a
``finish`` depending on row order, such as the first row per key, is caught). In process, the
micro-batches are ``BATCH_INTERVAL_US`` apart in processing time (``RunPlan.processing_time``;
a micro-batch executed again keeps its own), so a join that reads processing time (an
``idle_timeout`` up to that long) sees an input without rows in a micro-batch go idle. ``run_plans``
is the Hypothesis strategy of plans; its shrinking gives the fewest micro-batches and the
plainest run.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace
from typing import Any, Sequence

import pyarrow as pa

from streamjoin.testing.compare import format_table

__all__ = ["RunPlan", "run_plans", "shuffled", "without_rows", "BATCH_INTERVAL_US"]

#: The processing time between a run's consecutive micro-batches in process (one hour, in µs).
BATCH_INTERVAL_US = 3_600_000_000


@dataclass(frozen=True)
class RunPlan:
    """One streaming run (see module docstring). ``batches[i][r]`` is the micro-batch of row ``r``
    of input ``i`` (non-decreasing); ``restart_before`` (1 to ``count - 1``) and ``repeat`` (0 to
    ``count - 1``) are numbers of micro-batches the plan has, so that what it describes happens;
    ``shuffle`` seeds the permutation of the output's rows (None: the order the run produced).
    Raises ``ValueError`` for a disturbance outside the plan's micro-batches."""

    batches: tuple[tuple[int, ...], ...]
    partitions: int = 1
    store: str = "memory"
    restart_before: int | None = None
    repeat: int | None = None
    shuffle: int | None = None

    def __post_init__(self) -> None:
        count = self.count
        if self.restart_before is not None and not 1 <= self.restart_before < count:
            raise ValueError(f"restart_before={self.restart_before} is not a micro-batch after the first of this "
                             f"plan's {count}: pass 1 to {count - 1}, or None for no restart")
        if self.repeat is not None and not 0 <= self.repeat < count:
            raise ValueError(f"repeat={self.repeat} is not a micro-batch of this plan's {count}: pass 0 to "
                             f"{count - 1}, or None")

    @property
    def count(self) -> int:
        """The number of micro-batches (at least 1)."""
        return 1 + max((b for rows in self.batches for b in rows), default=0)

    def processing_time(self, version: int) -> int:
        """Micro-batch ``version``'s processing time, µs after the run's first (see module)."""
        return version * BATCH_INTERVAL_US

    def split(self, inputs: Sequence[pa.Table]) -> list[tuple[pa.Table, ...]]:
        """Each micro-batch's slice of every input, in order."""
        out = []
        for v in range(self.count):
            out.append(tuple(_slice(table, rows, v) for table, rows in zip(inputs, self.batches)))
        return out

    def describe(self, inputs: Sequence[pa.Table], names: Sequence[str]) -> str:
        """The plan in words, then every micro-batch's rows as tables."""
        lines = [f"{self.count} micro-batch(es), {self.partitions} partition(s), store {self.store!r}"]
        if self.restart_before is not None:
            lines.append(f"query restarted with its local state lost before micro-batch {self.restart_before}")
        if self.repeat is not None:
            lines.append(f"micro-batch {self.repeat} executed twice")
        if self.shuffle is not None:
            lines.append(f"output rows given to finish in another order (shuffle seed {self.shuffle})")
        for v, tables in enumerate(self.split(inputs)):
            for name, table in zip(names, tables):
                if table.num_rows:
                    rows = [tuple(r.values()) for r in table.to_pylist()]
                    lines.append(f"micro-batch {v}, {name}:\n" + _indent(format_table(table.column_names, rows)))
        return "\n".join(lines)


def shuffled(table: pa.Table, seed: int | None) -> pa.Table:
    """``table`` with its rows permuted by ``seed`` (unchanged for None)."""
    if seed is None or table.num_rows < 2:
        return table
    order = list(range(table.num_rows))
    random.Random(seed).shuffle(order)
    return table.take(pa.array(order, pa.int64()))


def _slice(table: pa.Table, rows: Sequence[int], version: int) -> pa.Table:
    index = [r for r, b in enumerate(rows) if b == version]
    if not index:
        return table.slice(0, 0)
    return table.slice(index[0], len(index))


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def without_rows(inputs: Sequence[pa.Table], plan: RunPlan, which: int, drop: set[int]
                 ) -> tuple[list[pa.Table], RunPlan]:
    """``inputs`` and ``plan`` without rows ``drop`` of input ``which``; micro-batches left empty
    by every input are removed (the later ones renumbered)."""
    keep = [r for r in range(inputs[which].num_rows) if r not in drop]
    tables = list(inputs)
    tables[which] = inputs[which].take(pa.array(keep, pa.int64()))
    batches = list(plan.batches)
    batches[which] = tuple(plan.batches[which][r] for r in keep)
    used = sorted({b for rows in batches for b in rows})
    number = {b: i for i, b in enumerate(used)}

    def renumber(v: int | None) -> int | None:
        later = [b for b in used if v is not None and b >= v]
        return number[later[0]] if later else None

    restart = renumber(plan.restart_before)
    return tables, replace(plan, batches=tuple(tuple(number[b] for b in rows) for rows in batches),
                           restart_before=restart or None, repeat=renumber(plan.repeat))


def run_plans(sizes: Sequence[int], *, max_batches: int, partitions: Sequence[int], stores: Sequence[str],
              disturb: bool = True, reorder: bool = True) -> Any:
    """Plans for inputs of ``sizes`` rows: 1 to ``max_batches`` micro-batches, a partition count
    and a store from those given (the first ones when shrunk), a restart and a repeated
    micro-batch when ``disturb`` (drawn among the micro-batches the rows were cut into, so that
    they happen), and an output order (``shuffle``) when ``reorder``."""
    from streamjoin.testing._hypothesis import strategies as st

    @st.composite
    def plans(draw: Any) -> RunPlan:
        n = draw(st.integers(1, max_batches))
        batches = tuple(tuple(sorted(draw(st.lists(st.integers(0, n - 1), min_size=s, max_size=s)))) for s in sizes)
        part = draw(st.sampled_from(list(partitions)))
        store = draw(st.sampled_from(list(stores)))
        count = 1 + max((b for rows in batches for b in rows), default=0)  # the later ones got no row
        restart = draw(st.none() | st.integers(1, count - 1)) if disturb and count > 1 else None
        repeat = draw(st.none() | st.integers(0, count - 1)) if disturb else None
        shuffle = draw(st.none() | st.integers(1, 2**16)) if reorder else None
        return RunPlan(batches, part, store, restart, repeat, shuffle)

    return plans()
