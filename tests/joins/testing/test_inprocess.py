"""The in-process engine: a pipeline gets the options it declares, ``state_dir`` too, a new one
after a restart (as in Spark)."""

from __future__ import annotations

import datetime as dt
import os

from streamjoin.testing import assert_deterministic
from streamjoin.testing.inprocess import InProcessEngine
from streamjoin.testing.plan import RunPlan
from tests.joins.testing.pipelines import CHANGE_ROWS, EVENT_ROWS, count_per_plan

SEEN: list[tuple[str, bool]] = []


def enriched_in_state_dir(events, changes, *, joins, checkpoint, state_dir):
    out = joins.stream_table_join(events, changes, "user_id", stream_time="ts", table_key="user_id",
                                  table_time="changed_at", delay=dt.timedelta(0), checkpoint=f"{checkpoint}/enrich",
                                  state_dir=state_dir)
    SEEN.append((state_dir, bool(os.listdir(state_dir))))  # the join's local stores are under it
    return out


def test_in_process_engine_gives_the_pipeline_a_new_state_dir_after_a_restart():
    SEEN.clear()
    plan = RunPlan(((0, 0, 0, 1, 1, 1, 1), (0, 0, 1, 1, 1)), restart_before=1)
    engine = InProcessEngine(enriched_in_state_dir, count_per_plan)
    assert engine.stream([EVENT_ROWS, CHANGE_ROWS], plan).rows == engine.batch([EVENT_ROWS, CHANGE_ROWS]).rows
    streamed = SEEN[:3]  # micro-batch 0, then 1 after the restart, then the final version
    assert all(filled for _, filled in SEEN)
    assert streamed[0][0] != streamed[1][0] == streamed[2][0]


def test_assert_deterministic_passes_a_pipeline_keeping_its_stores_in_state_dir():
    report = assert_deterministic(enriched_in_state_dir, [EVENT_ROWS, CHANGE_ROWS], finish=count_per_plan,
                                  max_examples=10)
    assert report.examples == 10
