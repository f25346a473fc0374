"""No-data flush: what makes Spark run a micro-batch when the join's watermark moves.

Spark runs a micro-batch only when a source has new data, or when one of its own stateful
operators says the advanced watermark lets it emit or evict. A streamjoin join is not one of
Spark's operators, so after the last rows of a quiet stream its watermark (computed from the
commit records of the versions before ``v``) would wait for new data to advance, holding back
closed windows of outer and anti joins and as-of events whose table watermark has passed.

**Ticks.** A join unions into its input a stream of Spark's own text file source over
``<checkpoint>/flush/`` (:func:`tick_stream`). A task whose version had rows with an event time
(rows that may move the join's watermark) writes an empty *tick* file there, ``tick-<version>``
(:func:`write_tick`; the partitions of one version write the same name). At the next trigger the
file source finds the new file, and Spark runs one more micro-batch even if no other source has
data: that version sees the advanced watermark and releases what it closes. It has no rows, so
it writes no tick and the query idles. Empty files hold no rows; the source deletes the files it
has read (``cleanSource``). The join's watermark stays its own (the ticks only decide when Spark
runs a batch), so the output is the output of a later data batch, earlier.

The file source is Spark's (JVM) code: it costs a directory listing a trigger and nothing at
start-up, where a Python data source costs a Python process started for every query (about one
second before the first micro-batch, measured with ``streamjoin bench interval``). Under
``availableNow`` the file source reads the ticks present when the run starts, so a tick written
by a run's last micro-batch runs its no-data batch at the start of the next run. A join defined
with ``end_of_run="flush"`` or ``"release"`` uses the Python source below instead, whose offset
follows the join's progress during an ``availableNow`` run, so the run ends with its no-data
batch (and with ``"release"``, a batch that closes the inputs: :func:`closing_version`;
docs/design/end-of-input.md).

One query per join: the tasks of a second streaming query over the same joined DataFrame are
refused before they write anything (the checkpoint is bound to one query, ``query.json``).

**The Python source.** Until 0.2 the flush was a Python data source
(:class:`FlushSource`, ``streamjoin_flush``) whose offsets are in the running query's Spark offset
log; Spark cannot hand them to another kind of source. A checkpoint such a query claimed
(``flush.json``: a query of 0.2, or one defined with ``end_of_run`` other than ``"hold"``) keeps
that source, so the query restarts as it was. It refuses a second query on
the driver: a new query's source names itself with an owner token carried in every offset it
returns, and the first source to claim the checkpoint owns it.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:   # PySpark 4.2+: a source taking part in Trigger.AvailableNow (else Spark runs one batch)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1 wrap every source themselves
    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no such interface."""

from streamjoin.changelog.storage import open_storage
from streamjoin.errors import CheckpointMismatchError
from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["FlushSource", "flush_stream", "tick_stream", "write_tick", "spark_location", "uses_ticks", "SOURCE_NAME", "TICKS",
           "closing_version"]

#: The folder of a checkpoint that holds its ticks.
TICKS = "flush"
#: The file of a checkpoint that a query of the Python flush source claimed (see the module).
_LEGACY_CLAIM = "flush.json"
#: The folder of a checkpoint recording the version that closed its inputs (:func:`closing_version`).
_CLOSED = "closed"

SOURCE_NAME = "streamjoin_flush"
#: Set on a session once the source is registered in it (registering again makes Spark log a
#: warning at every join defined).
_REGISTERED = "_streamjoin_flush_registered"


class FlushSource(DataSource):
    """The data source ``streamjoin_flush``: options ``checkpoint``, ``partitions``, ``inputs``,
    ``release`` (``true``: an ``availableNow`` run ends by closing the inputs)."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return "_sj_flush long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _FlushReader(self.options["checkpoint"], int(self.options["partitions"]), int(self.options["inputs"]),
                            release=self.options.get("release", "false") == "true")


class _FlushReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"max_times": [...], "owner": <token>}`` (a ``release`` source adds
    ``"read"`` and ``"final"``, :meth:`_closing`); every batch plans no partitions, so no task reads this
    source (a partition reading nothing would cost a Python task a micro-batch). Under
    ``availableNow`` the offset still follows the join's progress, which only the rows present
    when the run started move: a batch that moved it is followed by one no-data batch that sees
    the advanced watermark, and the run ends when it stops moving (the trailing no-data batch
    Spark's own stateful operators get). ``release``: see :func:`closing_version`.
    ``owner``: see the module (one query per join)."""

    def __init__(self, checkpoint: str, partitions: int, inputs: int, release: bool = False) -> None:
        self.checkpoint, self.n_partitions, self.inputs = checkpoint, partitions, inputs
        self.release = release
        self._seen: tuple[int, list] | None = None
        self._available_now = False
        self._owner: str | None = None

    def initialOffset(self) -> dict:
        """The offset before the first: no owner, so the first offset (with one) differs from it and
        Spark runs the query's first micro-batch at once, even with no data, keeping the owner in
        its offset log from then on."""
        return {"max_times": [None] * self.inputs}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The join's progress now. PySpark 4.0 and 4.1 call this with no argument: without the
        start offset a restarted query's owner is not known here, so there the source claims
        nothing and a second query is refused by its tasks (``query.json``)."""
        if start is not None:
            self._adopt(start)
            if self._owner is None:   # a new query (or one started before offsets had owners)
                self._owner = uuid.uuid4().hex
                self._claim()
        offset = self._offset(self._progress())
        if self.release and start is not None:
            if start.get("final") is not None:   # closed: nothing more to run
                return dict(start)
            offset |= self._closing(start)
        return offset

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
            f"micro-batch ran), delete {checkpoint.uri}/flush.json"
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


def flush_stream(spark: SparkSession, checkpoint: str, partitions: int, inputs: int,
                 ticks: bool | None = None, release: bool = False) -> DataFrame:
    """A stream of no rows that makes Spark run a micro-batch when the join's watermark may have
    moved: :func:`tick_stream`, or the Python flush source (a checkpoint that a query of it
    claimed, or ``ticks`` False: ``end_of_run`` other than ``"hold"``; see the module).
    ``ticks``: :func:`uses_ticks` if the caller knows it. ``release``: the source closes the
    inputs at the end of an ``availableNow`` run (:func:`closing_version`)."""
    if not (uses_ticks(checkpoint) if ticks is None else ticks):
        return _python_flush_stream(spark, checkpoint, partitions, inputs, release)
    return tick_stream(spark, checkpoint)


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


def tick_stream(spark: SparkSession, checkpoint: str) -> DataFrame:
    """Spark's text file source over ``<checkpoint>/flush/`` (created here): a new tick file is a
    new offset, so a micro-batch; the files are empty, so it has no rows."""
    folder = _tick_folder(checkpoint)
    if "://" in folder:   # an object store has a folder once a file is under it (one Spark ignores)
        open_storage(folder).write_if_absent("_streamjoin_ticks", b"")
    else:
        os.makedirs(folder, exist_ok=True)
    return (spark.readStream.format("text").option("cleanSource", "delete")
            .load(spark_location(folder)))


def write_tick(checkpoint: str, version: int) -> None:
    """Ask for one more micro-batch after ``version`` (see the module): an empty ``tick-<version>``
    file, written once however many partitions ask. Not fsynced on a local disk: a tick lost in
    a machine crash only delays the release to the query's next micro-batch with data."""
    open_storage(_tick_folder(checkpoint), sync=False).write_if_absent(f"tick-{version:020d}", b"")


def spark_location(uri: str) -> str:
    """A location in the canonical form (:func:`streamjoin.changelog.storage.resolve_uri`) as
    Spark's Hadoop file systems name it: a local path as ``file:`` URI, ``/dbfs/x`` as
    ``dbfs:/x``, ``s3://`` as ``s3a://``; other URIs as they are."""
    if "://" not in uri:
        if uri.startswith("/dbfs/"):
            return "dbfs:" + uri[len("/dbfs"):]
        return "file://" + uri
    scheme, rest = uri.split("://", 1)
    return f"s3a://{rest}" if scheme == "s3" else uri


def _tick_folder(checkpoint: str) -> str:
    return f"{checkpoint.rstrip('/')}/{TICKS}"   # as CheckpointFiles.location names a checkpoint's files


def uses_ticks(checkpoint: str) -> bool:
    """Whether the flush of ``checkpoint``'s join is :func:`tick_stream` (else the Python source)."""
    return not _claimed_by_python_source(checkpoint)


def _claimed_by_python_source(checkpoint: str) -> bool:
    """Whether a query of the Python flush source claimed ``checkpoint`` (``flush.json``)."""
    return Checkpoint(checkpoint).files.exists(_LEGACY_CLAIM)


def _python_flush_stream(spark: SparkSession, checkpoint: str, partitions: int, inputs: int,
                         release: bool = False) -> DataFrame:
    """The Python flush source's stream (see the module)."""
    if not vars(spark).get(_REGISTERED):
        spark.dataSource.register(FlushSource)
        vars(spark)[_REGISTERED] = True
    return (spark.readStream.format(SOURCE_NAME).option("checkpoint", checkpoint)
            .option("partitions", str(partitions)).option("inputs", str(inputs))
            .option("release", "true" if release else "false").load())
