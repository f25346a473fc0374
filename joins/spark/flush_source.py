"""The Python flush source ``streamjoin_flush``: a stream of no rows whose offset is the join's
event-time progress (:mod:`streamjoin.spark.flush` says when a join uses it).

Spark starts a Python process on the driver for it with every query and imports this module
there (the data source is pickled by reference), before the query's first micro-batch: so it
imports only the checkpoint's records, not the Spark layer or the operators
(``streamjoin.spark`` imports its modules on first use).

**Offsets.** ``{"max_times": [...], "owner": <token>}``: the maxima the join's watermark is
computed from, read from the newest complete version's commit records. A batch whose rows moved
them makes the next offset differ, so Spark runs one more (no-data) micro-batch, which sees the
advanced watermark and releases what it closed. Every batch plans no partitions, so no task
reads this source. Under ``trigger(availableNow=True)`` the offset keeps following the progress,
which only the rows present when the run started move (``hold`` fixes it at the run's first
offset instead: what the last batch's watermark passed waits for the next run). ``release`` adds
``"read"`` and ``"final"``: :meth:`_FlushReader._closing`.

**Initial rows written as the query starts.** A join whose bootstrap or ``initial_state`` is
still being written when its query starts (``initial`` ``pending``: :func:`streamjoin.spark.runtime.run_operator`
writes them in a driver thread while Spark starts this source's process) has this source wait,
at its first offset, until they are complete, so the query's first micro-batch runs on all of
them; if their writing failed, the source raises
:class:`~streamjoin.errors.InitialRowsError` with the reason and the query stops before any task.

**One query per join.** A new query's source names itself with an owner token carried in every
offset it returns, and the first source to claim the checkpoint (``flush.json``) owns it: a second
query is refused on the driver.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any, Iterator, Mapping

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:   # PySpark 4.2+: a source taking part in Trigger.AvailableNow (else Spark runs one batch)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1 wrap every source themselves
    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no such interface."""

from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["FlushSource", "SOURCE_NAME", "CLAIM", "closing_version", "reader"]

SOURCE_NAME = "streamjoin_flush"
#: The file of a checkpoint that a query of this source claimed (see the module).
CLAIM = "flush.json"
#: How long :meth:`_FlushReader.ready` waits for a writing of initial rows running in its own
#: process (a query's stop waits for one such call at most).
READY_WAIT_S = 0.2
#: The folder of a checkpoint recording the version that closed its inputs (:func:`closing_version`).
_CLOSED = "closed"


class FlushSource(DataSource):
    """The data source ``streamjoin_flush``: options ``checkpoint``, ``partitions``, ``inputs``,
    ``release`` (``true``: an ``availableNow`` run ends by closing the inputs), ``hold``
    (``true``: an ``availableNow`` run runs no batch for progress made during it) and ``initial``
    (``pending``: wait for the initial rows being written, see the module)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return "_sj_flush long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return reader(self.options)


def reader(options: Mapping[str, str]) -> "_FlushReader":
    """The reader of a flush source with ``options`` (:class:`FlushSource` names them): also what
    the JVM flush source asks for its offsets (:mod:`streamjoin.spark.flush_jvm`)."""
    return _FlushReader(options["checkpoint"], int(options["partitions"]), int(options["inputs"]),
                        release=options.get("release", "false") == "true",
                        hold=options.get("hold", "false") == "true",
                        initial_pending=options.get("initial", "") == "pending")


class _FlushReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module. PySpark 4.0 and 4.1 call :meth:`latestOffset` with no argument: without the
    start offset a restarted query's owner is not known there, so the source claims nothing and
    a second query is refused by its tasks (``query.json``)."""

    def __init__(self, checkpoint: str, partitions: int, inputs: int, release: bool = False,
                 hold: bool = False, initial_pending: bool = False) -> None:
        self.checkpoint, self.n_partitions, self.inputs = checkpoint, partitions, inputs
        self.release, self.hold = release, hold
        self._initial_pending = initial_pending
        self._seen: tuple[int, list] | None = None
        self._available_now = False
        self._target: list | None = None
        self._owner: str | None = None

    def initialOffset(self) -> dict:
        """The offset before the first: no owner, so the first offset (with one) differs from it and
        Spark runs the query's first micro-batch at once, even with no data, keeping the owner in
        its offset log from then on."""
        self._wait_initial()
        return {"max_times": [None] * self.inputs}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The join's progress now (a ``hold`` source in an ``availableNow`` run: at its first call)."""
        self._wait_initial()
        if start is not None:
            self._adopt(start)
            if self._owner is None:   # a new query (or one started before offsets had owners)
                self._owner = uuid.uuid4().hex
                self._claim()
        if self.hold and self._available_now:
            if self._target is None:
                self._target = self._progress()
            offset = self._offset(self._target)
        else:
            offset = self._offset(self._progress())
        if self.release and start is not None:
            if start.get("final") is not None:   # closed: nothing more to run
                return dict(start)
            offset |= self._closing(start)
        return offset

    def _wait_initial(self) -> None:
        """Wait for the initial rows being written as the query starts (see the module), once."""
        if self._initial_pending:
            Checkpoint(self.checkpoint).initial.wait()
            self._initial_pending = False

    def ready(self) -> bool:
        """Whether the initial rows being written as the query starts are complete (or none are
        awaited); raises :class:`~streamjoin.errors.InitialRowsError` if their writing failed.
        Waits only where this process writes them, and at most ``READY_WAIT_S``, for the writing
        to end. The JVM flush source asks it between short sleeps of its own."""
        if self._initial_pending:
            # in the process that writes them (the JVM source's callbacks run in the driver's), wait
            # a little for the writing itself, so the answer follows its end at once
            writer = sys.modules.get("streamjoin.spark.initial_writer")
            if writer is not None:
                writer.await_written(self.checkpoint, READY_WAIT_S)
            if Checkpoint(self.checkpoint).initial.check() is None:
                return False
        self._initial_pending = False
        return True

    def prepareForTriggerAvailableNow(self) -> None:
        self._available_now = True

    def _closing(self, start: dict) -> dict:
        """What a ``release`` source adds to its offset. In an ``availableNow`` run: after a version
        that read rows, ``{"read": <version>}``, so Spark runs one more batch even when the rows
        did not move the progress; after a version that read no rows (so every source of the run
        had reached its end when Spark planned it), ``{"final": <next version>}``, recorded in the
        checkpoint before the offset is returned. Otherwise what ``start`` had, and a record of a
        version not yet committed (its offset never reached Spark's log: the driver stopped in
        between) is removed."""
        checkpoint = Checkpoint(self.checkpoint)
        newest = checkpoint.commits.newest_version()
        if newest is None:
            return {}
        rows = _rows_read(checkpoint, newest) if self._available_now else None
        if rows == 0:
            checkpoint.files.create_json(f"{_CLOSED}/v={newest + 1}.json", {"version": newest + 1})
            return {"final": newest + 1}
        for version in _closing_versions(checkpoint):
            if version > newest:
                checkpoint.files.delete_file(checkpoint.files.path(f"{_CLOSED}/v={version}.json"))
        if rows:
            return {"read": newest}
        return {"read": start["read"]} if "read" in start else {}

    def _offset(self, times: list) -> dict:
        return {"max_times": list(times)} | ({"owner": self._owner} if self._owner is not None else {})

    def _adopt(self, offset: dict | None) -> None:
        """Take the owner from an offset of Spark's offset log (a restarted query's)."""
        if self._owner is None and (offset or {}).get("owner"):
            self._owner = str(offset["owner"])   # type: ignore[index]
            self._claim()

    def _claim(self) -> None:
        """Refuse a checkpoint another streaming query writes (see the module)."""
        checkpoint = Checkpoint(self.checkpoint)
        if checkpoint.binding.claim_flush(self._owner or "") == self._owner:
            return
        bound = checkpoint.binding.bound_query()
        raise CheckpointMismatchError(
            f"the join with checkpoint {checkpoint.uri} already feeds another streaming query"
            + (f" ({bound})" if bound is not None else "")
            + ": a joined DataFrame can feed one streaming query, as its checkpoint holds that query's "
            "state. Call the join once per query, each with its own checkpoint=..., or write the join's "
            "output once (to a table or files) and read it in both. A query restarted from a new Spark "
            "checkpoint location is a new query: restart it from its old one, or give the join a new "
            "checkpoint. If no query writes this checkpoint any more (one stopped before its first "
            f"micro-batch ran), delete {checkpoint.uri}/{CLAIM}"
        )

    def _progress(self) -> list:
        checkpoint = Checkpoint(self.checkpoint)
        newest = checkpoint.commits.newest_version()
        if newest is None:
            return [None] * self.inputs
        if self._seen is None or self._seen[0] != newest:
            found = checkpoint.commits.newest_progress(self.inputs)   # a version being written is skipped
            if found is None:
                return [None] * self.inputs
            version, times = found
            if version != newest:   # look again next trigger, when the newest one is complete
                return list(times)
            self._seen = (newest, list(times))
        return self._seen[1]

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        self._adopt(end)   # a query restarted to run its first micro-batch again asks for no new offset
        return []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return iter(())

    def commit(self, end: dict) -> None:
        pass


def closing_version(checkpoint: Checkpoint) -> int | None:
    """The version that closed the join's inputs (``end_of_run="release"``), if one did: its tasks
    run as a batch run's last (``final``: every row held for lateness released, as the batch
    join of the rows read releases it), and a later version with rows is refused. The Python
    flush source records it (``closed/v=<version>.json``) before the offset that runs it reaches
    Spark's offset log, and removes a record whose offset never got there, so a restarted query
    closes at the same version."""
    versions = _closing_versions(checkpoint)
    return versions[0] if versions else None


def _closing_versions(checkpoint: Checkpoint) -> list[int]:
    names = checkpoint.files.names(_CLOSED)
    return sorted(int(n[2:-5]) for n in names if n.startswith("v=") and n.endswith(".json"))


def _rows_read(checkpoint: Checkpoint, version: int) -> int:
    """How many input rows every partition of ``version`` read (from its commit records)."""
    total = 0
    for info in checkpoint.files.entries(f"commits/v={version}"):
        if info.is_file and not info.base_name.startswith("base."):
            metrics = (checkpoint.files.read_json(checkpoint.files.rel(info.path)) or {}).get("metrics") or {}
            total += sum(int(v or 0) for k, v in metrics.items() if k.startswith("input_rows_"))
    return total
