"""One streaming query per join, checked on the driver when a query starts.

A join's checkpoint holds the state of one streaming query (``query.json``, bound by its first
task): a second query over the same joined DataFrame, or the join's query restarted from a new
Spark checkpoint location (a new query id) beside the join's old checkpoint, is refused by its
tasks. This module refuses both earlier, on the driver, as ``start()`` (or ``toTable()``) returns:
the joins defined in this process register the name of their observed metrics (which the
query's plan carries), and a started query whose plan holds a join whose checkpoint belongs to
another query is stopped before its first micro-batch runs, and
:class:`streamjoin.errors.CheckpointMismatchError` says which query owns the checkpoint and what to
do. Classic PySpark only (``DataStreamWriter`` is wrapped once, when the first streaming join is
defined); on Spark Connect the query runs on the server and the tasks' check stands. The check
never replaces the tasks' (a task that started first still refuses), and a check that cannot read
a checkpoint lets the query run (its tasks decide).

The query ``start()`` returns is given one more thing: when Spark cannot start a Python worker the
query needs in time (on a machine far busier than its cores, the Python flush source's process on
the driver, ``PythonStreamingSourceRunner``, on Spark Connect or where the JVM flush source cannot
load, can take longer to start than the 10 seconds Spark
waits for it), the query stops with "Python worker failed to connect back". That happens after
``start()`` returned, so :func:`explain_failures` makes the query's ``awaitTermination()``
raise, and its ``exception()`` return, a :class:`streamjoin.errors.WorkerStartError` that says
why and what to do, chained from Spark's exception (:func:`worker_start_failure`). The same
wrapper gives the :class:`streamjoin.errors.InitialRowsError` that the flush source raised when
the join's initial rows, written while the query started, could not be written
(:func:`initial_rows_failure`), in place of Spark's exception around its traceback.
"""

from __future__ import annotations

import functools
import logging
import threading
from typing import Any, Callable

from pyspark.sql import DataFrame

from streamjoin.errors import CheckpointMismatchError, InitialRowsError, JoinError, WorkerStartError
from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["register_join", "check_started", "explain_failures", "worker_start_failure", "initial_rows_failure"]

log = logging.getLogger("streamjoin")

#: text in a query's logical plan (its observed metrics' node) -> the join checkpoint it names
_JOINS: dict[str, str] = {}
#: join checkpoint -> id of the query last started over it in this process
_STARTED: dict[str, str] = {}
_LOCK = threading.Lock()
_WRAPPED = "_streamjoin_one_query_per_join"


def register_join(df: DataFrame, observation: str, checkpoint: str) -> None:
    """Check every query started over ``df`` (a streaming join's output, whose observed metrics
    are named ``observation``) for a checkpoint of another query (see module)."""
    if getattr(df, "_jdf", None) is None:   # Spark Connect: the tasks check
        return
    with _LOCK:
        _JOINS[f"CollectMetrics {observation},"] = checkpoint
    _wrap_writer()


def _wrap_writer() -> None:
    from pyspark.sql.streaming.readwriter import DataStreamWriter

    with _LOCK:
        if getattr(DataStreamWriter, _WRAPPED, False):
            return
        DataStreamWriter.start = _checked(DataStreamWriter.start)   # type: ignore[method-assign]
        DataStreamWriter.toTable = _checked(DataStreamWriter.toTable)   # type: ignore[method-assign]
        setattr(DataStreamWriter, _WRAPPED, True)


def _checked(start: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(start)
    def checked_start(writer: Any, *args: Any, **kwargs: Any) -> Any:
        joins = _joins_in(writer)
        query = start(writer, *args, **kwargs)
        if joins:
            try:
                check_started(str(query.id), joins, {str(q.id) for q in writer._df.sparkSession.streams.active})
            except CheckpointMismatchError:
                query.stop()
                raise
            except Exception:   # never in a user's way: the query's tasks check it too
                log.warning("streamjoin: could not check the join checkpoints of query %s", query.id, exc_info=True)
            explain_failures(query)
        return query
    return checked_start


def _joins_in(writer: Any) -> list[str]:
    """The join checkpoints registered here that the writer's query plan holds."""
    with _LOCK:
        markers = dict(_JOINS)
    if not markers:
        return []
    try:
        plan = writer._df._jdf.queryExecution().logical().toString()
    except Exception:
        return []
    return sorted({checkpoint for marker, checkpoint in markers.items() if marker in plan})


def check_started(query_id: str, checkpoints: list[str], active: set[str]) -> None:
    """Raise :class:`CheckpointMismatchError` when one of the join ``checkpoints`` of the query
    ``query_id`` (just started; ``active``: the ids of the session's running queries) belongs to
    another query: one bound to it (``query.json``), or one started over it in this process and
    still running; else note ``query_id`` as the query over them."""
    for checkpoint in checkpoints:
        bound = Checkpoint(checkpoint).binding.bound_query()
        with _LOCK:
            started = _STARTED.get(checkpoint)
            other = bound if bound not in (None, query_id) else None
            if other is None and started not in (None, query_id) and started in active:
                other = started
            if other is None:
                _STARTED[checkpoint] = query_id
                continue
        if other in active:
            raise CheckpointMismatchError(
                f"the join with checkpoint {checkpoint} already feeds streaming query {other}, which is "
                f"running; query {query_id} was stopped before its first micro-batch: a joined DataFrame "
                "feeds one streaming query, as its checkpoint holds that query's state. Call the join "
                "once per query, each with its own checkpoint=..., or write the join's output once (to "
                "a table or files) and read it in every query that needs it")
        raise CheckpointMismatchError(
            f"the join with checkpoint {checkpoint} belongs to streaming query {other}, and this query "
            f"({query_id}) is another one: it was stopped before its first micro-batch. A query restarted "
            "from a new (or emptied) Spark checkpoint location is a new query; restart it from its "
            "old checkpointLocation to continue the join, or give the join a new checkpoint= as well "
            "(a new join: its state starts empty)")


#: What Spark's exception says when a Python worker did not connect back in time, and the class
#: that starts the flush source's worker on the driver.
_NOT_CONNECTED = "failed to connect back"
_SOURCE_RUNNER = "PythonStreamingSourceRunner"


def explain_failures(query: Any) -> None:
    """Make ``query``'s ``awaitTermination()`` raise, and its ``exception()`` return, the
    :class:`WorkerStartError` of :func:`worker_start_failure` in place of a failure to start a
    Python worker, and the :class:`InitialRowsError` of :func:`initial_rows_failure` in place of
    Spark's exception around one (any other outcome is Spark's, unchanged)."""
    wait, exception = query.awaitTermination, query.exception

    @functools.wraps(wait)
    def await_termination(*args: Any, **kwargs: Any) -> Any:
        try:
            return wait(*args, **kwargs)
        except Exception as exc:
            failure = _explained(exc)
            if failure is None:
                raise
            raise failure from exc

    @functools.wraps(exception)
    def explained_exception() -> Any:
        found = exception()
        failure = None if found is None else _explained(found)
        if failure is None:
            return found
        failure.__cause__ = found
        return failure

    query.awaitTermination = await_termination
    query.exception = explained_exception


def _explained(exc: BaseException) -> JoinError | None:
    return worker_start_failure(exc) or initial_rows_failure(exc)


#: How the flush source's InitialRowsError shows in the Python traceback a query's exception holds.
_INITIAL_ROWS = f"{InitialRowsError.__module__}.{InitialRowsError.__name__}: "


def initial_rows_failure(exc: BaseException) -> InitialRowsError | None:
    """The :class:`InitialRowsError` the join's flush source raised in the query ``exc`` stopped
    (its message, from the traceback that Spark's exception holds); None for any other exception."""
    text = _failure_text(exc)
    at = text.find(_INITIAL_ROWS)
    if at < 0:
        return None
    message = text[at + len(_INITIAL_ROWS):].split("\n", 1)[0].strip()
    return InitialRowsError(message)


def worker_start_failure(exc: BaseException) -> WorkerStartError | None:
    """A :class:`WorkerStartError` saying what to do when ``exc`` (a query's exception, with its
    causes and their JVM stack traces) is Spark's failure to start a Python worker ("Python worker
    failed to connect back"); None for any other exception."""
    text = _failure_text(exc)
    if _NOT_CONNECTED not in text:
        return None
    source = _SOURCE_RUNNER in text
    which = ("the join's Python flush source (end_of_run 'flush', the default, or 'release'; Spark's "
             f"{_SOURCE_RUNNER}, a process on the driver), which did not connect back within the fixed 10 "
             "seconds Spark 4.3 waits for it (no setting changes that wait)") if source \
        else "a Python worker of the query, which did not connect back in time"
    hold = (" Or, for a scheduled run, pass end_of_run='hold': on a local or hdfs:// checkpoint it starts no "
            "Python source.") if source else ""
    return WorkerStartError(
        f"streamjoin: Spark could not start {which} (\"Python worker failed to connect back\"): the machine "
        "was too busy to start Python in time, which happens when its load is far above its cores. Start the "
        "query again from the same checkpointLocation (safe: the join's checkpoint resumes exactly where it "
        f"stopped), and lower the load on that machine (fewer jobs at once, or fewer Spark cores).{hold}")


def _failure_text(exc: BaseException) -> str:
    """The messages and JVM stack traces of ``exc`` and its causes (PySpark's captured exceptions
    keep the JVM's in ``_desc`` and ``_stackTrace``, and the converted cause in ``_cause``)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for text in (getattr(current, "_desc", None), getattr(current, "_stackTrace", None)):
            if isinstance(text, str):
                parts.append(text)
        try:
            parts.append(str(current))
        except Exception:   # a captured exception's str() asks the JVM, which may be gone
            pass
        cause = getattr(current, "_cause", None)
        current = cause if isinstance(cause, BaseException) else current.__cause__
    return "\n".join(parts)
