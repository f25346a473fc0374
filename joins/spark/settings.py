"""The Spark settings streamjoin's joins run best with.

``SPARK_SETTINGS`` names each setting and its value, for a session's builder
(``SparkSession.builder.config(map=dict(SPARK_SETTINGS))``) or, for its ``spark.sql.*`` entries on
a running session, for ``spark.conf.set`` (Spark Connect too). streamjoin never changes a
session's settings itself: they apply to every query of the session, the user's own Arrow UDFs
too. The jobs' sessions (``streamjoin demo``, ``timeline``...), the benchmarks' and the test
kit's use them.

* ``spark.sql.execution.arrow.maxBytesPerBatch = 2147483647``: Spark's largest value, which turns
  its byte limit on the Arrow batches it hands a ``mapInArrow`` off. Below it, Spark measures the
  batch it is filling after every row it adds (``ArrowWriter.sizeInBytes``, a pass over every
  column's vectors); that check was an eighth of Spark's own CPU samples in the table join's
  benchmark, whose join stages are ``mapInArrow`` stages. Batches stay bounded by
  ``spark.sql.execution.arrow.maxRecordsPerBatch`` (10,000 rows by default), so a batch reaches
  Spark's default limit of 64 MB only when rows average over 6.7 KB: with rows that large, keep the
  byte limit or lower the row limit instead.
* ``spark.executorEnv.MIMALLOC_ALLOW_THP = 0`` and ``spark.executorEnv.NUMPY_MADVISE_HUGEPAGE = 0``:
  the Python workers' Arrow allocator (mimalloc, pyarrow's default) and numpy stop asking Linux
  for transparent huge pages. With them, every fresh 2 MB of memory a worker touches is a huge
  page the kernel zeroes whole at the first write, and the joins allocate and free large Arrow
  buffers every version: on the 2-core machine of the benchmarks the kernel's zeroing of huge pages
  was a third of a three-table view's CPU samples in one process (``perf``), and alternated against
  the code before (design step 31 of the runtime's design) the view's change micro-batches in
  Spark took 0.85x the seconds and the table join's 1M-row load 0.85x. They set environment
  variables of the workers, read when a worker starts:
  they act from a session's builder (a running session's ``spark.conf.set`` takes them without
  effect), and a process that runs the joins itself (``streamjoin.testing.LocalJoins``) takes them
  from its own environment (``MIMALLOC_ALLOW_THP=0 NUMPY_MADVISE_HUGEPAGE=0 python ...``).
  ``streamjoin bench`` turns huge pages off in its own process and the processes it starts,
  so the joins it runs in process measure as the workers run.
* ``spark.python.unix.domain.socket.enabled = true``: Spark reaches its Python workers over Unix
  domain sockets instead of TCP on the loopback. Over TCP, a task whose Python side sends nothing
  back before its input has all arrived (every join task: it reads all its rows, then steps) often
  waits about 40 ms for a piece of its input: Linux delays the worker's acknowledgement of the
  bytes before it (the delayed ACK), and the JVM's socket holds back the small piece that follows
  until it comes (Nagle's algorithm). A Unix socket has neither. In the table join's benchmark
  that wait was in every key-stage task; alternated with the main before, the latency benchmark's
  release latency under traffic was 0.77x and the enrichment's seconds 0.96x, while the table
  join's change micro-batches took 1.03-1.04x with 1.04-1.06x the JVM's CPU
  (docs/design/runtime.md, arranged state, step 48). A Spark core setting, read when the session
  starts: it acts from the builder or ``--conf``, and ``spark.conf.set`` on a running session
  refuses it, so set only the ``spark.sql.*`` entries there.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

__all__ = ["SPARK_SETTINGS"]

#: The Spark settings streamjoin's joins run best with (see module): name -> value.
SPARK_SETTINGS: Mapping[str, str] = MappingProxyType({
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
    "spark.python.unix.domain.socket.enabled": "true",
    "spark.executorEnv.MIMALLOC_ALLOW_THP": "0",
    "spark.executorEnv.NUMPY_MADVISE_HUGEPAGE": "0",
})
