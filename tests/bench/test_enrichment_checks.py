"""The enrichment benchmark's checks compare real figures: the bootstrap rows loaded and the join's
totals cover every micro-batch, not only the versions whose commit records are retained."""

from __future__ import annotations

import datetime
import os

from streamjoin.bench import enrichment as bench
from streamjoin.bench.enrichment import CHANGES, DELAY_S, EVENTS, Outcome, Params, bootstrap_loaded, generate
from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.task import TaskInfo, run_task


def test_enrichment_bench_bootstrap_loaded_counts_rows_after_commit_records_are_pruned(tmp_path):
    params = Params(events=300, table_rows=50, updates=30, batches=5, partitions=2)
    inputs = generate(params)
    op = EnrichmentJoin(EVENTS, CHANGES, "user_id", stream_time="ts", changes=ChangeFormat.plain("user_id", time="changed_at"),
                        how="left", delay=datetime.timedelta(seconds=DELAY_S))
    checkpoint = Checkpoint(str(tmp_path / "join"))
    checkpoint.binding.bind(op.definition(), params.partitions)
    for p, part in enumerate(bench._route(op.bootstrap_changes(inputs.snapshot), params.partitions)):
        checkpoint.initial.write("table", p, part)
    checkpoint.initial.mark_done({"table": inputs.snapshot.num_rows})
    assert bootstrap_loaded(checkpoint, params.partitions) == 0   # written, not loaded yet
    config = StateConfig(store="memory", local_dir=os.path.join(tmp_path, "state"), retain_versions=3, initial=True)
    records = []
    versions = bench.in_process_versions(inputs)
    for version, (events, changes) in enumerate(versions):
        parts = [bench._route(events, params.partitions), bench._route(changes, params.partitions)]
        for p in range(params.partitions):
            records.append(run_task(op, checkpoint, config, TaskInfo(version, p, params.partitions),
                                         (parts[0][p], parts[1][p]))[1])
    kept = bench.join_summary(records)
    assert kept["initial_rows_table"] == 50 and kept["output_rows"] == kept["matched"] == 300
    # the retained commit records lost the first version's (the old check read 0 snapshot rows there)
    assert bench.join_summary(checkpoint.commits.read_metrics())["initial_rows_table"] == 0
    assert bootstrap_loaded(checkpoint, params.partitions) == 50


def _progress(batch: int, name: str, **metrics: int) -> dict:
    return {"batchId": batch, "observedMetrics": {name: {"metrics": metrics}, "other": {"output_rows": 1_000}}}


def test_enrichment_bench_observed_totals_count_each_micro_batch_once():
    name = "streamjoin enrichment_join /tmp/x/join"
    progress = [_progress(0, name, output_rows=0, matched=0, events_waiting=40, input_rows_table=7),
                _progress(1, name, output_rows=30, matched=30, events_waiting=10, input_rows_stream=20),
                _progress(1, name, output_rows=30, matched=30, events_waiting=10),   # an idle trigger's report
                _progress(2, name, output_rows=10, matched=9, events_waiting=0, set_aside_rows_stream=1)]
    totals = bench.observed_totals(progress)
    assert (totals["output_rows"], totals["matched"], totals["events_waiting"], totals["versions"]) == (40, 39, 0, 3)
    assert (totals["input_rows_table"], totals["input_rows_stream"], totals["set_aside_rows_stream"]) == (7, 20, 1)


def test_enrichment_bench_problems_compare_the_join_totals():
    params = Params(events=40, table_rows=50, updates=0, batches=1, partitions=1)
    good = {"output_rows": 40, "matched": 40, "set_aside_rows_stream": 0, "set_aside_rows_table": 0,
            "initial_rows_table": 50}
    assert bench.problems(params, {"streamjoin-memory": [Outcome(1.0, 0.1, 40, 3, join=good)]}) == []
    lines = bench.problems(params, {"streamjoin-memory": [Outcome(1.0, 0.1, 40, 3, join=good | {"initial_rows_table": 0})]})
    assert len(lines) == 1 and "0 snapshot rows loaded" in lines[0]
