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

One query per join. The source is also where the driver refuses a second streaming query over the
same joined DataFrame (whose tasks would write the one checkpoint, bound to one query), before any
of its tasks runs. A new query's source (one whose offsets from Spark's offset log carry no owner)
names itself with a new owner token, carried in every offset it returns, so Spark's offset log
keeps it and the query gets it back when it restarts. The first source to claim the checkpoint
(``flush.json``) owns it; a source of another owner is refused with :class:`CheckpointMismatchError`
when Spark asks it for an offset. (A checkpoint a query wrote before owners were recorded is
claimed by the next query that runs it; another query is then refused by its tasks, ``query.json``,
as on PySpark 4.0 and 4.1, which do not give the source its start offset.)
"""

from __future__ import annotations

import uuid
from typing import Any, Iterator

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

try:   # PySpark 4.2+: a source taking part in Trigger.AvailableNow (else Spark runs one batch)
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - PySpark 4.0 and 4.1 wrap every source themselves
    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Stand-in where PySpark has no such interface."""

from streamjoin.errors import CheckpointMismatchError
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
    """Offsets are ``{"max_times": [...], "owner": <token>}``; every batch plans no partitions, so
    no task reads this source (a partition reading nothing would cost a Python task a micro-batch).
    Under ``availableNow`` the offset is the one found when the query starts, so such a run stops
    when its data is read. ``owner``: see the module (one query per join)."""

    def __init__(self, checkpoint: str, partitions: int, inputs: int) -> None:
        self.checkpoint, self.n_partitions, self.inputs = checkpoint, partitions, inputs
        self._seen: tuple[int, list] | None = None
        self._until: list | None = None
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
        return self._offset(self._until if self._until is not None else self._progress())

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._progress()

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
        if checkpoint.claim_flush(self._owner or "") == self._owner:
            return
        bound = checkpoint.bound_query()
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
        newest = checkpoint.newest_metrics_version()
        if newest is None:
            return [None] * self.inputs
        if self._seen is None or self._seen[0] != newest:
            found = checkpoint.newest_progress(self.inputs)   # a version being written is skipped
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


def flush_stream(spark: SparkSession, checkpoint: str, partitions: int, inputs: int) -> DataFrame:
    """A stream of no rows whose offsets follow the join's event-time progress in ``checkpoint``."""
    if not vars(spark).get(_REGISTERED):
        spark.dataSource.register(FlushSource)
        vars(spark)[_REGISTERED] = True
    return (spark.readStream.format(SOURCE_NAME).option("checkpoint", checkpoint)
            .option("partitions", str(partitions)).option("inputs", str(inputs)).load())
