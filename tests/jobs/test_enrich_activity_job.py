"""The activity-enrichment job end to end at a tiny size: its as-of output equals the
independent calculation, and its summary's numbers add up."""

from __future__ import annotations

import pytest

from streamjoin.jobs.cli import build_parser
from streamjoin.jobs.enrich_activity import Paths, config_from_args, run_job
from streamjoin.jobs.enrich_activity_report import print_summary

pytestmark = pytest.mark.spark


def test_enrich_activity_job_matches_the_independent_calculation(spark, tmp_path, capsys):
    args = build_parser().parse_args(["enrich-activity", "--events", "300", "--users", "30", "--batches", "2",
                                      "--partitions", "2", "--seed", "3", "--out", str(tmp_path)])
    s = run_job(config_from_args(args), str(tmp_path), store=args.store, partitions=args.partitions, spark=spark)
    print_summary(s)
    assert "as-of result equals the independent calculation: yes" in capsys.readouterr().out
    assert s.same and s.mismatches == 0 and s.files_are_batches
    assert s.events_in == s.counts["events"] == s.events_out + sum(s.stream_dead_letters.values())
    assert s.enriched + s.no_profile_unknown_user + s.no_profile_at_that_time == s.events_out
    assert s.waited + s.joined_on_arrival == s.events_out and s.waited > 0 and s.joined_on_arrival > 0
    assert s.table_dead_letters == {"unknown op": 1, "null key": 1, "null change time": 1}
    assert s.late_changes == 0 and s.stale_changes == 0
    assert s.latest_compared == s.events_out and s.latest_different == sum(s.latest_causes.values()) > 0
    assert spark.read.parquet(Paths(str(tmp_path)).output("as_of")).count() == s.events_out
