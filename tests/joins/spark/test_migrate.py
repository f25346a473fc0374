"""A streaming query of streamjoin 0.2 (an interval join; a stream-table join; a table-table join of three stages,
whose key stages each had 0.2's flush source and whose inputs carry no event time), stopped, its
join checkpoint migrated (``streamjoin checkpoint migrate``) and the query restarted by this
streamjoin on the same join and Spark checkpoints: its sink then holds exactly what this
streamjoin's query writes when it runs over every file from the start (the view changes written
by 0.2 without the ``_change_timestamp`` column it has since). The queries, their files and
checkpoints come from 0.2's own code (tests/fixtures/format1/generate.py)."""

from __future__ import annotations

import collections
import glob
import os
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import streamjoin
from streamjoin import read_state
from streamjoin.errors import CheckpointMismatchError
from streamjoin.jobs.cli import main
from tests.fixtures.format1 import data

pytestmark = pytest.mark.spark

FIXTURES = os.path.dirname(data.__file__)


def _relocated(kind: str, root: str) -> None:
    """The fixture of query ``kind`` at ``root``, its recorded paths pointing there."""
    shutil.copytree(os.path.join(FIXTURES, f"spark-{kind}"), root)
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if name.endswith(".parquet") or name.endswith(".arrow"):
                continue
            with open(path, "rb") as fh:
                text = fh.read()
            if data.ROOT_MARK.encode() in text:
                with open(path, "wb") as fh:
                    fh.write(text.replace(data.ROOT_MARK.encode(), root.encode()))


def _sink(root: str) -> collections.Counter:
    files = sorted(glob.glob(f"{root}/out/part-*.parquet"))
    rows = pa.concat_tables([pq.read_table(f) for f in files], promote_options="default").to_pylist()
    return collections.Counter(tuple(sorted((k, v) for k, v in r.items() if k != "_change_timestamp")) for r in rows)


@pytest.mark.parametrize("kind, state", [("interval", ("ck", "left")), ("table", ("ck/join", "left")),
                                         ("enrichment", ("ck", "table"))])
def test_migrated_0_2_query_restarts_on_its_spark_checkpoint_as_an_uninterrupted_run(spark, tmp_path, capsys, kind,
                                                                                    state):
    migrated = str(tmp_path / "migrated")
    _relocated(kind, migrated)
    before = _sink(migrated)
    assert sum(before.values()) > 0
    data.write_spark_files(kind, migrated, data.SPARK_BEFORE, data.SPARK_FILES)
    with pytest.raises(CheckpointMismatchError, match=r"streamjoin 0.2 \(format 1\).*checkpoint migrate"):
        data.spark_query(spark, streamjoin, kind, migrated).awaitTermination()
    assert main(["checkpoint", "migrate", f"{migrated}/ck", "--force"]) == 0
    assert "format 1 -> 2, state as of version 2 in 2 partitions" in capsys.readouterr().out
    held = read_state(spark, f"{migrated}/{state[0]}", side=state[1]).count()   # in the old partitions until the run
    assert held > 0
    data.spark_query(spark, streamjoin, kind, migrated).awaitTermination()

    fresh = str(tmp_path / "fresh")
    data.write_spark_files(kind, fresh, 0, data.SPARK_FILES)
    data.spark_query(spark, streamjoin, kind, fresh).awaitTermination()
    assert _sink(migrated) == _sink(fresh)
    assert sum(_sink(fresh).values()) > sum(before.values())
    assert main(["checkpoint", "verify", f"{migrated}/ck"]) == 0
