"""A streaming join's query as ``start()`` returns it (``streamjoin.spark.queries``): when Spark
cannot start a Python worker the query needs in time ("Python worker failed to connect back",
the flush source's process on a loaded driver), ``awaitTermination()`` raises, and
``exception()`` returns, a ``WorkerStartError`` that says why and what to do, chained from Spark's
exception; every other outcome is Spark's. Fakes stand for the query and Spark's exceptions (no
load needed)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from streamjoin import StreamjoinError
from streamjoin.errors import WorkerStartError
from streamjoin.spark import queries

_RUNNER = "org.apache.spark.sql.execution.python.streaming.PythonStreamingSourceRunner"


class _Captured(Exception):
    """As PySpark's captured exceptions: the JVM's message, stack trace and converted cause."""

    def __init__(self, desc: str, stack: str, cause: "_Captured | None" = None) -> None:
        super().__init__(desc)
        self._desc, self._stackTrace, self._cause = desc, stack, cause


def _stopped(where: str) -> _Captured:
    """A query stopped because a Python worker (started by ``where``) did not connect back."""
    cause = _Captured("Python worker failed to connect back.",
                      "org.apache.spark.SparkException: Python worker failed to connect back.\n"
                      "\tat org.apache.spark.api.python.PythonWorkerFactory.createSimpleWorker(PythonWorkerFactory.scala)\n"
                      f"\tat {where}.init({where.rsplit('.', 1)[1]}.scala)\n"
                      "Caused by: java.net.SocketTimeoutException: Timed out while waiting for the Python worker "
                      "to connect back")
    return _Captured("[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: Python worker failed "
                     "to connect back. SQLSTATE: XXKST", "\tat org.apache.spark.sql.execution.streaming.StreamExecution",
                     cause)


def _started(monkeypatch, failure: Exception | None):
    """A query started through the wrapped ``DataStreamWriter.start`` over a join, that ends with
    ``failure``."""
    class Query:
        id = "query-1"

        def awaitTermination(self, timeout=None):
            if failure is not None:
                raise failure
            return True

        def exception(self):
            return failure

    monkeypatch.setattr(queries, "_joins_in", lambda writer: ["/checkpoints/join"])
    monkeypatch.setattr(queries, "check_started", lambda *args: None)
    writer = SimpleNamespace(_df=SimpleNamespace(sparkSession=SimpleNamespace(streams=SimpleNamespace(active=[]))))
    return queries._checked(lambda writer: Query())(writer)


def test_queries_flush_source_that_failed_to_connect_back_says_why_and_what_to_do(monkeypatch):
    failure = _stopped(_RUNNER)
    query = _started(monkeypatch, failure)
    with pytest.raises(WorkerStartError) as raised:
        query.awaitTermination()
    message = str(raised.value)
    for said in ("flush source", "failed to connect back", "too busy", "start the query again",
                 "same checkpointLocation", "lower the load", "end_of_run='hold'", "no setting"):
        assert said.lower() in message.lower(), said
    assert raised.value.__cause__ is failure and isinstance(raised.value, StreamjoinError)
    explained = query.exception()
    assert isinstance(explained, WorkerStartError) and explained.__cause__ is failure


def test_queries_task_worker_that_failed_to_connect_back_is_explained_without_the_flush_source_advice(monkeypatch):
    query = _started(monkeypatch, _stopped("org.apache.spark.sql.execution.python.MapInArrowEvaluator"))
    with pytest.raises(WorkerStartError, match="Start the query again") as raised:
        query.awaitTermination()
    assert "end_of_run" not in str(raised.value)


def test_queries_other_outcomes_are_sparks_unchanged(monkeypatch):
    other = _Captured("[STREAM_FAILED] division by zero", "\tat org.apache.spark.sql.catalyst")
    query = _started(monkeypatch, other)
    with pytest.raises(_Captured) as raised:
        query.awaitTermination(5)
    assert raised.value is other and query.exception() is other
    assert _started(monkeypatch, None).awaitTermination() is True
    assert _started(monkeypatch, None).exception() is None


def test_queries_initial_rows_failure_raises_initial_rows_error(monkeypatch):
    from streamjoin.errors import InitialRowsError

    traceback = ("Traceback (most recent call last):\n  File \"flush_source.py\", line 1, in initialOffset\n"
                 "streamjoin.errors.InitialRowsError: the initial rows of the join with checkpoint /ck (its bootstrap "
                 "or initial_state) could not be written: ValueError: bad. Fix them and define the join again\n")
    failure = _Captured("[STREAM_FAILED] Query terminated with exception: " + traceback, "\tat Stream")
    query = _started(monkeypatch, failure)
    with pytest.raises(InitialRowsError, match=r"^the initial rows of the join with checkpoint /ck .* ValueError: bad\. "
                                               r"Fix them and define the join again$") as raised:
        query.awaitTermination()
    assert raised.value.__cause__ is failure
    assert isinstance(query.exception(), InitialRowsError)
    assert queries.initial_rows_failure(_Captured("another failure", "")) is None
