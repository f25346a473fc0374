"""No-data flush: what makes Spark run a micro-batch when the join's watermark moves.

Spark runs a micro-batch only when a source has new data, or when one of its own stateful
operators says the advanced watermark lets it emit or evict. A streamjoin join is not one of
Spark's operators, so after the last rows of a quiet stream its watermark (computed from the
commit records of the versions before ``v``) would wait for new data to advance, holding back
closed windows of outer and anti joins and as-of events whose table watermark has passed. So a
streaming join unions into its input a stream of no rows that has new data when the join's
progress moved: one of two sources, chosen by :func:`plan_flush` when the join is defined.

**The flush source** (``end_of_run="flush"``, the default, and ``"release"``): its offset is the
join's progress, which it keeps following during a ``trigger(availableNow=True)`` run, so the run
ends with the no-data batch its advanced watermark needs, as Spark's own stateful operators get it
(docs/design/end-of-input.md). Its offsets are computed by one reader
(:mod:`streamjoin.spark.flush_source`), reached one of two ways:

* in a classic session, the **JVM flush source** (:mod:`streamjoin.spark.flush_jvm`): a small Java
  class whose offsets this driver process computes, called back through py4j; a query's start
  waits for nothing;
* where that cannot load (Spark Connect), the **Python flush source** ``streamjoin_flush``: Spark
  starts a Python process on the driver for it with every query, before the first micro-batch;
  that process imports PySpark from Spark's ``pyspark.zip``, which Python cannot cache compiled,
  so it costs 1-2.5 s a query start (``streamjoin bench runtime --flush-sources jvm,python``); what
  it imports of streamjoin (the reader's module) does not import pandas (a test checks it).

Both return the same offsets in the same JSON, so a checkpoint runs with either.

**No flush** where no micro-batch is needed: a join none of whose output waits for the watermark
(an inner or semi interval join, a ``latest`` enrichment, a table-table join without
``expire_rows``: :attr:`streamjoin.runtime.operator.Operator.waits_for_watermark`) emits every
row in the micro-batch whose rows caused it, so a no-data batch would release nothing; what the
advanced watermark lets it evict goes at its next micro-batch with rows (or the next run's
first), and the output is the same. A join none of whose inputs carries an event time (a
table-table join without a retention) has no watermark at all. Neither gets a flush source
(unless asked for ``"release"``, which needs the batch that closes the inputs): its query reads
its own sources only, with no listing of a tick folder, no tick file written per version and no
Python process at its start.

**Ticks** (``end_of_run="hold"``): Spark's own text file source over ``<checkpoint>/flush/``
(:func:`tick_stream`), no Python process. A task whose version had rows with an event time
(rows that may move the join's watermark) writes an empty *tick* file there, ``tick-<version>``
(:func:`write_tick`; the partitions of one version write the same name); at the next trigger the
file source finds it and Spark runs one more micro-batch even if no other source has data. Under
``availableNow`` the file source reads the ticks present when the run starts, so a tick written
by a run's last micro-batch runs its no-data batch at the start of the next run. Empty files
hold no rows; the source deletes the files it has read (``cleanSource``). Spark reads the folder
through its Hadoop file systems, which reach a local (or ``/dbfs``) path and ``hdfs://`` without
connectors; a ``"hold"`` join checkpointed elsewhere (``s3://``, ``gs://``, ``abfss://``) has the
flush source in its ``hold`` mode (its offset fixed for an ``availableNow`` run).

**A checkpoint keeps its source.** The source's offsets are in the query's Spark offset log, which
Spark hands back to the same kind of source only. A checkpoint whose query ran with ticks (a
``"hold"`` join, the default before 0.3) stays with them: defined with the default it keeps
``"hold"`` (with a warning saying so), with ``"flush"`` or ``"release"`` it is refused. One whose
query ran the flush source (``flush.json``, or a streamjoin 0.2 query's, migrated) keeps that
source, JVM or Python, whichever of the three it is given.
The joins' output does not depend on the source, only when rows come out.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from streamjoin.changelog.storage import open_storage
from streamjoin.errors import CheckpointMismatchError, JoinDefinitionError
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.checkpoint.binding import MIGRATED_FROM
from streamjoin.runtime.options import EndOfRun
from streamjoin.spark.flush_jvm import jvm_flush_stream
from streamjoin.spark.flush_source import CLAIM, SOURCE_NAME, FlushSource, closing_version

__all__ = ["Flush", "plan_flush", "flush_stream", "tick_stream", "write_tick", "spark_location", "SOURCE_NAME",
           "TICKS", "closing_version"]

log = logging.getLogger("streamjoin")

#: The folder of a checkpoint that holds its ticks.
TICKS = "flush"
#: Set on a session once the source is registered in it, to the environment it was registered
#: with (registering again makes Spark log a warning at every join defined).
_REGISTERED = "_streamjoin_flush_registered"
#: Schemes whose folders Spark's file source reads without a connector on its classpath.
_SPARK_SCHEMES = ("hdfs",)


@dataclass(frozen=True)
class Flush:
    """How a join's query gets its no-data micro-batches: ``end_of_run`` as it runs, and whether
    its flush is the tick file source (else the flush source, JVM or Python)."""

    end_of_run: EndOfRun
    ticks: bool

    @property
    def release(self) -> bool:
        return self.end_of_run == "release"


def plan_flush(checkpoint: str, asked: EndOfRun | None, processing_time: bool = False, waits: bool = True,
               timed: bool = True) -> Flush | None:
    """The flush of the join with ``checkpoint`` given ``end_of_run=asked`` (None: the default,
    ``"flush"``), by the rules of the module. ``waits``: whether some of the join's output waits
    for the watermark (:attr:`streamjoin.runtime.operator.Operator.waits_for_watermark`); a join
    none of whose output does needs no no-data batch: no flush (None), unless its checkpoint ran
    with one (ticks are then kept without a word) or it is asked to ``"release"``. ``timed``:
    whether any input of the join carries an event time; a join with none has no watermark, so no
    flush either, on the same terms. Raises :class:`JoinDefinitionError` for ``"flush"``
    or ``"release"`` on a checkpoint that ran with ticks, and :class:`CheckpointMismatchError`
    for anything but ``"release"`` on one whose inputs a ``"release"`` run closed (new rows would
    all be late there, and a restart without new rows has nothing to do).

    ``processing_time``: the join reads processing time (``idle_timeout``). Its query runs no
    task in a micro-batch where no input has rows (seen with Spark 4.3: the version is skipped,
    and the next one cannot restore it), so it keeps ``"hold"`` by default and refuses the modes
    that end a run with such a batch."""
    if processing_time and asked in ("flush", "release"):
        raise JoinDefinitionError(
            f"end_of_run={asked!r} with idle_timeout: a join that reads processing time runs no task in a "
            "micro-batch where no input has rows, and the run's trailing micro-batch is one; leave "
            "end_of_run out (it is 'hold' for such a join) or drop idle_timeout")
    if processing_time and asked is None:
        asked = "hold"
    cp = Checkpoint(checkpoint)
    closed = closing_version(cp)
    if closed is not None and asked != "release":
        raise CheckpointMismatchError(
            f"end_of_run={asked or 'flush'!r}: the join with checkpoint {checkpoint} closed its inputs in version "
            f"{closed} (end_of_run='release': every row held for lateness was released then), so every new row "
            "would be set aside as late. Give new data to a join with a new checkpoint (and its query a new "
            "Spark checkpoint location), or define this one with end_of_run='release' (a run without new rows "
            "then does nothing, one with new rows is refused)")
    if _ran_with_ticks(cp):
        if not waits and asked in (None, "flush"):
            return Flush("flush", ticks=True)
        if asked is None:
            log.warning("streamjoin: the join with checkpoint %s ran with end_of_run='hold' (the default before "
                        "0.3) and keeps it: an availableNow run leaves what its last micro-batch's watermark "
                        "passed to the next run. Pass end_of_run='hold' to say so, or start the join (and its "
                        "query) from new checkpoint locations for the same-run release", checkpoint)
        elif asked != "hold":
            raise JoinDefinitionError(
                f"end_of_run={asked!r}: the join with checkpoint {checkpoint} has run with end_of_run='hold' (the "
                "default before 0.3), whose no-data flush (Spark's file source) is in its query's Spark offset "
                "log and cannot be replaced by another source there. Pass end_of_run='hold' (or leave it out) "
                "for this checkpoint, or start the join (and its query) from new checkpoint locations")
        return Flush("hold", ticks=True)
    python = _ran_python_source(cp)
    if (not timed or not waits) and asked != "release" and not python:
        # no watermark moves (no input has an event time), or what it passes releases nothing (it
        # only evicts, which the next micro-batch with rows does as well): no micro-batch to ask for
        return None
    end_of_run: EndOfRun = asked or "flush"
    ticks = end_of_run == "hold" and not python and _spark_reads(checkpoint)   # no batch after a run's last
    return Flush(end_of_run, ticks)


def flush_stream(spark: SparkSession, checkpoint: str, partitions: int, inputs: int, flush: Flush,
                 initial_pending: bool = False) -> DataFrame:
    """A stream of no rows that makes Spark run a micro-batch when the join's watermark may have
    moved: :func:`tick_stream`, or the flush source (see the module; the JVM one where the session
    loads it, else the Python one), which waits for the initial rows being written when
    ``initial_pending`` (:mod:`streamjoin.spark.flush_source`; ticks cannot wait, so the caller
    writes the rows first for them)."""
    if flush.ticks:
        return tick_stream(spark, checkpoint)
    options = {"checkpoint": checkpoint, "partitions": str(partitions), "inputs": str(inputs),
               "release": str(flush.release).lower(), "hold": str(flush.end_of_run == "hold").lower(),
               "initial": "pending" if initial_pending else ""}
    stream = jvm_flush_stream(spark, options)
    if stream is not None:
        return stream
    _register(spark)
    return spark.readStream.format(SOURCE_NAME).schema("_sj_flush long").options(**options).load()


def _register(spark: SparkSession) -> None:
    """Register the Python flush source in ``spark`` once, and again when the environment Spark
    gives its Python processes changed since (a registration keeps the one of its time)."""
    try:
        environment: dict | None = dict(spark.sparkContext.environment)
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext here
        environment = None
    if _REGISTERED not in vars(spark) or vars(spark)[_REGISTERED] != environment:
        spark.dataSource.register(FlushSource)
        vars(spark)[_REGISTERED] = environment


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


def _spark_reads(checkpoint: str) -> bool:
    """Whether Spark's file source reads ``checkpoint``'s tick folder without a connector."""
    return "://" not in checkpoint or checkpoint.split("://", 1)[0] in _SPARK_SCHEMES


def _ran_python_source(cp: Checkpoint) -> bool:
    """Whether the checkpoint's query ran the Python source: it claimed the checkpoint
    (``flush.json``), or it is a streaming query's of streamjoin 0.2, migrated
    (:mod:`streamjoin.runtime.migrate`), whose every stage reading sources had one."""
    if cp.files.exists(CLAIM):
        return True
    root = cp.binding.root() or {}
    return root.get(MIGRATED_FROM) == 1 and root.get("mode", "streaming") == "streaming"


def _ran_with_ticks(cp: Checkpoint) -> bool:
    """Whether the checkpoint's query ran with ticks: it committed a version, has a tick folder
    (made when such a join is defined) and no claim of the Python source."""
    if cp.files.exists(CLAIM) or cp.commits.newest_version() is None:
        return False
    return cp.files.exists(TICKS)
