"""Writing a join's initial rows (its bootstrap, or ``initial_state``) on the driver: at once, or
in a thread of their own while the streaming query starts.

The rows are routed to their partitions by Spark jobs (:func:`streamjoin.spark.runtime.run_operator`'s
``write``), about two seconds for a million rows on two cores, while a streaming query whose join
has the flush source starts (on Spark Connect, where the source is the Python one, Spark starts
its process then, about as long, needing one core where the jobs' tasks take the others;
``docs/design/runtime.md``, "Initial rows"). So for such a query :func:`write` starts the writing
in a thread and returns: the join's DataFrame
is ready at once, as Spark's own are, and the flush source waits at its first offset until the
rows are complete (:mod:`streamjoin.spark.flush_source`), so no task of the first micro-batch runs
before them. A writing that fails records why in the checkpoint, and the query's first
micro-batch raises :class:`streamjoin.errors.InitialRowsError` with it; the driver's log has it
too. Any other query (a batch run, a join with no flush or with ticks) has its rows written
before :func:`write` returns, as before.

The threads are PySpark's ``InheritableThread``: the job runs with the defining thread's local
properties (its scheduler pool, job group and description; on Spark Connect its tags), as a job
started by that thread would. They are not daemons, so a driver script that defines a join and
ends waits for its rows; defining a join on the same checkpoint again in this process waits for
the writing before (:func:`wait_for`).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Mapping

from pyspark import InheritableThread

from streamjoin.runtime.bind import BoundQuery, write_initial_rows
from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["write", "wait_for", "await_written"]

log = logging.getLogger("streamjoin")

_RUNNING: dict[str, threading.Thread] = {}
_LOCK = threading.Lock()


def write(bound: BoundQuery, rows: Callable[[BoundQuery], Mapping[str, int]], *, in_background: bool,
          session: Any = None) -> None:
    """Write the initial rows of ``bound`` (bound with ``initial_pending``) with ``rows``: in a
    thread when ``in_background`` (see the module; ``session``: the SparkSession whose jobs write
    them, which Spark Connect needs), else before returning (raising what writing raises)."""
    if not in_background:
        write_initial_rows(bound, rows)
        return

    def run() -> None:
        started = time.monotonic()
        try:
            counts = write_initial_rows(bound, rows)
        except Exception:  # noqa: BLE001 - recorded for the query (InitialRowsError) and logged here
            log.exception("streamjoin: writing the initial rows of the join with checkpoint %s failed; its "
                          "query stops at its first micro-batch", bound.uri)
            return
        finally:
            with _LOCK:
                if _RUNNING.get(_key(bound.uri)) is threading.current_thread():
                    del _RUNNING[_key(bound.uri)]
        log.info("streamjoin: wrote the initial rows of the join with checkpoint %s (%s) in %.1f s", bound.uri,
                 ", ".join(f"{name}: {n:,}" for name, n in counts.items()) or "none", time.monotonic() - started)

    log.info("streamjoin: writing the initial rows of the join with checkpoint %s while its query starts",
             bound.uri)
    thread = InheritableThread(run, session=session, name=f"streamjoin-initial-rows {bound.uri}", daemon=False)
    with _LOCK:
        _RUNNING[_key(bound.uri)] = thread
    thread.start()


def wait_for(uri: str) -> None:
    """Wait for a writing of the initial rows of checkpoint ``uri`` that this process started, if
    one is running."""
    with _LOCK:
        thread = _RUNNING.pop(_key(uri), None)
    if thread is not None:
        thread.join()


def await_written(uri: str, timeout: float) -> bool:
    """Wait at most ``timeout`` seconds for a writing of the initial rows of checkpoint ``uri``
    that this process started; whether none is running any more (its outcome is then in the
    checkpoint: complete, or failed with its reason). The JVM flush source's wait asks through
    this, so its first offset follows the writing's end at once instead of at its next look."""
    with _LOCK:
        thread = _RUNNING.get(_key(uri))
    if thread is None:
        return True
    thread.join(timeout)
    return not thread.is_alive()


def _key(uri: str) -> str:
    """The checkpoint ``uri`` as its :class:`Checkpoint` resolves it (one key however it was given)."""
    return Checkpoint(uri).uri
