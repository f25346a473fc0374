"""The JVM flush source: the flush source's offsets computed in the driver's own Python process.

The Python flush source (:mod:`streamjoin.spark.flush_source`) makes Spark start a Python process
on the driver with every query, before its first micro-batch: about 1.5-2.5 s on a quiet 2-core
machine (most of it importing PySpark from Spark's ``pyspark.zip``, which Python cannot cache
compiled), and much more on a loaded one, where it can fail to connect back in Spark's fixed 10 s.
This source is a small Java class (``streamjoin.flush.FlushProvider``, in the jar beside this
module, built from ``joins/spark/jvm/`` by ``scripts/build-jar``) whose offsets a Python object of
*this* process computes, called back through py4j as ``foreachBatch`` functions and query
listeners are: the same reader (:func:`streamjoin.spark.flush_source.reader`), so the same
offsets, in the same JSON, and a checkpoint can run with either source. It starts nothing.

:func:`jvm_flush_stream` adds the jar to the session once (``ADD JAR``: the session's class
loader and its executors get it; ``LIST JARS`` shows it) and starts PySpark's callback server.
Where either is not possible (Spark Connect, whose client has no JVM; a platform that refuses
``ADD JAR``) it returns None and the join uses the Python source, as before.

The stream waits for initial rows being written as the query starts (``initial`` ``pending``)
in sleeps of its own, which ``query.stop()`` interrupts, asking :meth:`_FlushReader.ready` between them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from importlib import resources
from typing import Any, Mapping

from pyspark.sql import DataFrame, SparkSession

from streamjoin.spark.flush_source import reader

__all__ = ["jvm_flush_stream", "JAR", "PROVIDER", "ENABLED"]

log = logging.getLogger("streamjoin")

#: The jar of the JVM flush source, a file of this package.
JAR = "jars/streamjoin-flush.jar"
#: Its provider class, which Spark loads by name.
PROVIDER = "streamjoin.flush.FlushProvider"
#: The manifest attribute of the jar that holds :func:`sources_digest` of its sources.
DIGEST_ATTRIBUTE = "Streamjoin-Sources-SHA256"
#: Whether joins defined from now on use this source where the session loads it (False: the Python
#: flush source always; ``streamjoin bench runtime --flush-sources python,jvm`` compares the two).
ENABLED = True
#: Set on a SparkContext once its session added the jar: True, or the reason it could not.
_ADDED = "_streamjoin_flush_jar"
_lock = threading.Lock()


def jar_path() -> str:
    """The jar's path in the installed package."""
    return str(resources.files("streamjoin.spark").joinpath(JAR))


def sources_digest(folder: str) -> str:
    """SHA-256 of the Java sources in ``folder`` (``joins/spark/jvm`` of a checkout), by name and
    content: ``scripts/build-jar`` writes it into the jar's manifest, and a test checks that the
    jar was built from the sources as they are."""
    digest = hashlib.sha256()
    for name in sorted(n for n in os.listdir(folder) if n.endswith(".java")):
        with open(os.path.join(folder, name), "rb") as f:
            digest.update(name.encode() + b"\0" + f.read() + b"\0")
    return digest.hexdigest()


def jvm_flush_stream(spark: SparkSession, options: Mapping[str, str]) -> DataFrame | None:
    """The JVM flush source with the Python flush source's ``options`` (``checkpoint``,
    ``partitions``, ``inputs``, ``release``, ``hold``, ``initial``), or None where this session
    cannot load it (see the module)."""
    if not ENABLED or not _loaded(spark):
        return None
    return spark.readStream.format(PROVIDER).options(**options).load()


def _loaded(spark: SparkSession) -> bool:
    """Whether the source can run in ``spark``: the jar added, PySpark's callback server started
    and this process's :class:`_Progress` registered, once a driver (why not is logged once, at
    INFO)."""
    try:
        context = spark.sparkContext
        gateway: Any = context._gateway
    except Exception:  # noqa: BLE001 - Spark Connect: no SparkContext, no JVM in this process
        return False
    if gateway is None:
        return False
    with _lock:
        added = vars(context).get(_ADDED)
        if added is None:
            try:
                from pyspark.java_gateway import ensure_callback_server_started
                ensure_callback_server_started(gateway)
                quoted = jar_path().replace("\\", "\\\\").replace("'", "\\'")
                spark.sql(f"ADD JAR '{quoted}'")
                gateway.jvm.streamjoin.flush.FlushProvider.register(_Progress())
                added = True
            except Exception as e:  # noqa: BLE001 - any refusal leaves the Python source
                added = f"{type(e).__name__}: {e}".splitlines()[0]
                log.info("streamjoin: the JVM flush source cannot be loaded in this session (%s); joins use "
                         "the Python flush source, which starts a Python process with every query", added)
            vars(context)[_ADDED] = added
    return added is True


class _Progress:
    """The driver's ``streamjoin.flush.Progress``: a new reader per stream (one a query start)."""

    def open(self, checkpoint: str, partitions: str, inputs: str, release: str, hold: str,
             initial: str) -> "_Stream":
        return _Stream(reader({"checkpoint": checkpoint, "partitions": partitions, "inputs": inputs,
                               "release": release, "hold": hold, "initial": initial}))

    class Java:
        implements = ["streamjoin.flush.Progress"]


class _Stream:
    """A ``streamjoin.flush.ProgressStream``: the reader's offsets as JSON (as PySpark's runner
    writes the Python source's, so the offset logs of both read alike)."""

    def __init__(self, flush_reader: Any) -> None:
        self._reader = flush_reader

    def ready(self) -> bool:
        return bool(self._reader.ready())

    def initialOffset(self) -> str:  # noqa: N802 - the Java interface's names
        return json.dumps(self._reader.initialOffset())

    def latestOffset(self, start: str | None) -> str:  # noqa: N802
        return json.dumps(self._reader.latestOffset(None if start is None else json.loads(start), None))

    def prepareForTriggerAvailableNow(self) -> None:  # noqa: N802
        self._reader.prepareForTriggerAvailableNow()

    def planned(self, end: str) -> None:
        self._reader.partitions({}, json.loads(end))

    class Java:
        implements = ["streamjoin.flush.ProgressStream"]
