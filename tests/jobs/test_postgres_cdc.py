"""The PostgreSQL job's shutdown: queries stopped between micro-batches, then the session once idle."""

from __future__ import annotations

from streamjoin.jobs.postgres_cdc import shut_down


class _Query:
    """A query whose running micro-batch ends after ``busy`` polls of its status."""

    def __init__(self, name: str, busy: int, log: list[str]) -> None:
        self.name, self.busy, self.log, self.isActive = name, busy, log, True

    @property
    def status(self) -> dict:
        self.busy -= 1
        return {"isTriggerActive": self.busy >= 0}

    def stop(self) -> None:
        self.log.append(f"stop {self.name} (batch running: {self.busy >= 0})")
        self.isActive = False


class _Spark:
    """A session with Spark jobs still running for ``busy`` polls."""

    def __init__(self, busy: int, log: list[str]) -> None:
        self.busy, self.log = busy, log
        self.sparkContext = self

    def statusTracker(self) -> "_Spark":
        return self

    def getActiveJobsIds(self) -> list[int]:
        self.busy -= 1
        return [7] if self.busy >= 0 else []

    def stop(self) -> None:
        self.log.append(f"stop session (jobs running: {self.busy >= 0})")


def test_shut_down_stops_each_query_between_batches_then_the_idle_session():
    log: list[str] = []
    shut_down(_Spark(3, log), [_Query("enrich", 2, log), _Query("view", 0, log)])
    assert log == ["stop enrich (batch running: False)", "stop view (batch running: False)",
                   "stop session (jobs running: False)"]


def test_shut_down_gives_up_waiting_after_the_timeout():
    log: list[str] = []
    shut_down(_Spark(10**9, log), [_Query("view", 10**9, log)], timeout=0.2)
    assert log == ["stop view (batch running: True)", "stop session (jobs running: True)"]
