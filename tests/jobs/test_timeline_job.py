"""The timeline job end to end at a tiny size: the view equals the batch join after every micro-batch."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from streamjoin.jobs.timeline import run_job
from streamjoin.jobs.timeline_generator import TimelineConfig
from streamjoin.jobs.timeline_report import expected_view

pytestmark = pytest.mark.spark


def test_timeline_job_view_equals_the_join_after_every_batch(spark, tmp_path, capsys):
    config = TimelineConfig(posts=90, users=30, batches=3, stale_rate=0.05, seed=3)
    summary = run_job(config, str(tmp_path), store="rocksdb", partitions=2, spark=spark)
    assert summary.consistent and [r.batch_id for r in summary.results] == [0, 1, 2]
    assert "equals the join of the current tables: yes" in capsys.readouterr().out
    generated = summary.generated
    assert summary.metrics["left_keys"].get("stale_changes", 0) == generated.posts["stale"] > 0
    assert summary.metrics["right_keys"].get("unknown_deletes", 0) == generated.follows["unknown_delete"] > 0
    assert generated.posts["reassign"] > 0 and generated.follows["delete"] > 0
    showcase = generated.showcase
    before, after = summary.timelines[showcase.batch - 1], summary.timelines[showcase.batch]
    assert any(r["post_id"] == showcase.post_id for r in before)
    assert not any(r["post_id"] == showcase.post_id or r["author_id"] == showcase.unfollowed for r in after)
    assert pq.read_table(summary.paths.timelines).num_rows == summary.view_rows
    assert pq.read_table(summary.paths.view_changes).num_rows == sum(summary.changes_out.values())
    # the check is not vacuous: the final view differs from the join of the tables of an earlier batch
    final = pq.read_table(summary.paths.timelines)
    earlier = expected_view(spark, summary.paths, 0, final.schema)
    assert sorted(map(tuple, (r.values() for r in earlier.to_pylist()))) != sorted(
        map(tuple, (r.values() for r in final.to_pylist())))
