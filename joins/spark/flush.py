"""No-data flush: a streaming source that makes Spark run a micro-batch when the join's watermark moves.

Spark runs a micro-batch only when a source has new data, or when one of its own stateful
operators says the advanced watermark lets it emit or evict. A streamjoin join is not one of
Spark's operators, so after the last rows of a quiet stream its watermark (computed from the
commit records of the versions before ``v``) would wait for new data to advance, holding back
closed windows of outer and anti joins and as-of events whose table watermark has passed.

This source holds no rows. Its offset is the join's global event-time progress: every input's
largest event time over all partitions' rows, from the names of the newest complete version's
commit records (one listing). When a version raised a
maximum, the next trigger finds a new offset and Spark runs one more micro-batch; that version
sees the advanced watermark and releases what it closes. Nothing changes after that version, so
the offset stays put and the query idles. The join's watermark stays its own (the source only
decides when Spark runs a batch), so the output is the output of a later data batch, earlier.

The offset is computed on the driver (Spark's Python data source runner) from the checkpoint,
which the driver must be able to read (it is on shared storage on a cluster); the newest committed
version is cached, so a trigger that finds no new version reads one listing.
"""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:   # PySpark 4.2+: a source taking part in Trigger.AvailableNow (else Spark runs one batch)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1 wrap every source themselves
    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no such interface."""

from streamjoin.runtime.checkpoint import Checkpoint

__all__ = ["FlushSource", "flush_stream", "SOURCE_NAME"]

SOURCE_NAME = "streamjoin_flush"
#: Set on a session once the source is registered in it (registering again makes Spark log a
#: warning at every join defined).
_REGISTERED = "_streamjoin_flush_registered"


class FlushSource(DataSource):
    """The data source ``streamjoin_flush``: options ``checkpoint``, ``partitions``, ``inputs``."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return "_sj_flush long"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _FlushReader(self.options["checkpoint"], int(self.options["partitions"]), int(self.options["inputs"]))


class _FlushReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Offsets are ``{"max_times": [...]}``; every batch plans no partitions, so no task reads this
    source (a partition reading nothing would cost a Python task a micro-batch). Under ``availableNow`` the
    offset is the one found when the query starts, so such a run stops when its data is read."""

    def __init__(self, checkpoint: str, partitions: int, inputs: int) -> None:
        self.checkpoint, self.n_partitions, self.inputs = checkpoint, partitions, inputs
        self._seen: tuple[int, dict] | None = None
        self._until: dict | None = None

    def initialOffset(self) -> dict:
        return {"max_times": [None] * self.inputs}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        """The join's progress now (PySpark 4.0 and 4.1 call this with no argument)."""
        return self._until if self._until is not None else self._progress()

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._progress()

    def _progress(self) -> dict:
        checkpoint = Checkpoint(self.checkpoint)
        newest = checkpoint.newest_metrics_version()
        if newest is None:
            return self.initialOffset()
        if self._seen is None or self._seen[0] != newest:
            found = checkpoint.newest_progress(self.inputs)   # a version being written is skipped
            if found is None:
                return self.initialOffset()
            version, times = found
            if version != newest:   # look again next trigger, when the newest one is complete
                return {"max_times": list(times)}
            self._seen = (newest, {"max_times": list(times)})
        return self._seen[1]

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        return []

    def read(self, partition: InputPartition) -> Iterator[tuple]:
        return iter(())

    def commit(self, end: dict) -> None:
        pass


def flush_stream(spark: SparkSession, checkpoint: str, partitions: int, inputs: int) -> DataFrame:
    """A stream of no rows whose offsets follow the join's event-time progress in ``checkpoint``."""
    if not vars(spark).get(_REGISTERED):
        spark.dataSource.register(FlushSource)
        vars(spark)[_REGISTERED] = True
    return (spark.readStream.format(SOURCE_NAME).option("checkpoint", checkpoint)
            .option("partitions", str(partitions)).option("inputs", str(inputs)).load())
