"""Initial rows: rows given to a join's first version (e.g. a bootstrap snapshot), routed to
their partitions: ``initial/<input>/p=<p>.arrow``, or in pieces, one from each task of the job
that routed them without a shuffle, ``initial/<input>/p=<p>/piece-<n>.arrow`` (a partition's
rows are all its files); ``initial/done.json`` marks the set complete
(with each input's row count), ``initial/used/p=<p>.json`` the version that took a partition's.
Rows written while the query starts (:func:`streamjoin.runtime.bind.write_initial_rows`) that
could not be written leave ``initial/failed.json`` with the reason instead of ``done.json``.

A join started from state rows (:mod:`streamjoin.runtime.initial_state`) keeps them the same way,
under the name :func:`state_name` of each side (``initial/_state_<side>/p=<p>.arrow``), with the
summary its first version needs (maxima over every partition's rows) in ``initial/summary.json``."""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

import pyarrow as pa
import pyarrow.ipc as ipc

from streamjoin.errors import CheckpointMismatchError, InitialRowsError
from streamjoin.runtime.checkpoint.files import CheckpointFiles

__all__ = ["Initial", "state_name", "summary_progress", "PROGRESS", "STATE_PREFIX"]

#: The prefix of the summary's entries that give an input's event-time progress (in its time column's unit: µs for a timestamp).
PROGRESS = "max_time:"

#: The prefix of the names state rows are kept under (an input name never starts with ``_``).
STATE_PREFIX = "_state_"


def state_name(side: str) -> str:
    """The name the state rows of ``side`` are kept under."""
    return STATE_PREFIX + side


def summary_progress(summary: Mapping[str, int], inputs: tuple[str, ...]) -> tuple[int | None, ...] | None:
    """Each input's event-time progress the state rows were read at (``summary``'s
    ``max_time:<input>``, :data:`PROGRESS`), for a join started from them; None when it has none."""
    found = tuple(summary.get(PROGRESS + name) for name in inputs)
    return None if all(t is None for t in found) else found


class Initial:
    """Reads and writes one checkpoint's initial rows (see module)."""

    def __init__(self, files: CheckpointFiles) -> None:
        self.files = files

    def write(self, input_name: str, partition: int, table: pa.Table) -> None:
        """Store rows that partition ``partition``'s first version adds to input ``input_name``."""
        self._write_table(f"initial/{input_name}/p={partition}.arrow", table)

    def write_piece(self, input_name: str, partition: int, piece: int, table: pa.Table) -> None:
        """Store part of partition ``partition``'s initial rows of ``input_name``: the rows that
        writer ``piece`` (a task of the job routing them, each of which writes the rows it read,
        partition by partition, with no shuffle) has for it. :meth:`read` joins a partition's
        pieces; written again (a task run again), a piece is replaced."""
        self._write_table(f"initial/{input_name}/p={partition}/piece-{piece:06d}.arrow", table)

    def _write_table(self, rel: str, table: pa.Table) -> None:
        def produce(sink: Any) -> None:
            with ipc.new_file(sink, table.schema) as writer:
                writer.write_table(table)

        self.files.write(rel, produce)

    def read(self, input_name: str, partition: int, done: Mapping[str, int] | None = None) -> pa.Table | None:
        """The initial rows of ``input_name`` for ``partition``; None if there are none.
        ``done``: :meth:`done`, if already read.

        Raises :class:`CheckpointMismatchError` if initial rows were started but never completed
        (the job that writes them failed): the first version must not run on part of them.
        """
        if (self.done() if done is None else done) is None:
            self._refuse_incomplete()
            return None
        rel = f"initial/{input_name}/p={partition}"
        pieces = [f"{rel}/{n}" for n in sorted(self.files.names(rel)) if n.endswith(".arrow")]
        tables = []
        for name in pieces or [f"{rel}.arrow"]:   # (a partition's one file: written before pieces)
            try:
                with self.files.fs.open_input_file(self.files.path(name)) as source:
                    tables.append(ipc.open_file(source).read_all())
            except FileNotFoundError:
                continue
        if not tables:
            return None
        return tables[0] if len(tables) == 1 else pa.concat_tables(tables)

    def read_all(self, names: tuple[str, ...], partition: int) -> tuple[pa.Table | None, ...]:
        """:meth:`read` of each input in ``names`` for ``partition`` (``done.json`` read once)."""
        done = self.done()
        if done is None:
            self._refuse_incomplete()
            return (None,) * len(names)
        return tuple(self.read(name, partition, done) for name in names)

    def _refuse_incomplete(self) -> None:
        if self.files.exists("initial"):
            raise CheckpointMismatchError(
                f"checkpoint {self.files.uri} holds initial rows that were never completed (the job writing a "
                "bootstrap or initial_state failed); define the join again to write them, or use a new "
                "checkpoint location"
            )

    def clear(self) -> None:
        """Remove initial rows never completed (an earlier writing cut short), before writing them."""
        if self.files.exists("initial"):
            self.files.delete_dir("initial")

    def mark_done(self, counts: Mapping[str, int]) -> None:
        """Mark the initial rows complete, with how many each input has."""
        self.files.write_json("initial/done.json", {"rows": dict(counts)})

    def mark_failed(self, reason: str) -> None:
        """Record that writing the initial rows failed, and why (:meth:`wait` raises it)."""
        self.files.write_json("initial/failed.json", {"reason": reason})

    def failure(self) -> str | None:
        """Why writing the initial rows failed (:meth:`mark_failed`); None if it has not."""
        found = self.files.read_json("initial/failed.json")
        return None if found is None else str(found["reason"])

    def check(self) -> dict[str, int] | None:
        """:meth:`done` if the initial rows being written are complete, else None; raise
        :class:`InitialRowsError` with the reason if their writing failed."""
        done = self.done()
        if done is not None:
            return done
        failed = self.failure()
        if failed is not None:
            raise InitialRowsError(
                f"the initial rows of the join with checkpoint {self.files.uri} (its bootstrap or "
                f"initial_state) could not be written: {failed}. Fix them and define the "
                "join again: its first version runs on them once they are written")
        return None

    def wait(self, sleep: Callable[[float], None] = time.sleep, longest: float = 0.5) -> dict[str, int]:
        """Wait until the initial rows being written are complete and return :meth:`done`; raise
        :class:`InitialRowsError` with the reason if their writing failed (:meth:`check`). Looks
        every 10 ms at first, then less often, at most every ``longest`` seconds (an object store
        is asked once a look)."""
        pause = 0.01
        while True:
            done = self.check()
            if done is not None:
                return done
            sleep(pause)
            pause = min(pause * 1.5, longest)

    def write_summary(self, summary: Mapping[str, int]) -> None:
        """Record the state rows' summary (written before :meth:`mark_done`)."""
        self.files.write_json("initial/summary.json", {"summary": dict(summary)})

    def summary(self) -> dict[str, int]:
        """The state rows' summary; empty when none was recorded."""
        found = self.files.read_json("initial/summary.json")
        return {} if found is None else {k: int(v) for k, v in found["summary"].items()}

    def done(self) -> dict[str, int] | None:
        """Row counts per input of completed initial rows; None if none were completed."""
        found = self.files.read_json("initial/done.json")
        return None if found is None else dict(found["rows"])

    def used(self, partition: int) -> int | None:
        """The version in which ``partition`` took its initial rows; None if it has not."""
        found = self.files.read_json(f"initial/used/p={partition}.json")
        return None if found is None else int(found["version"])

    def mark_used(self, partition: int, version: int) -> None:
        """Record that ``partition`` took its initial rows in ``version``."""
        self.files.write_json(f"initial/used/p={partition}.json", {"version": version})
