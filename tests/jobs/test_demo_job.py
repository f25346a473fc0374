"""The demo job (``streamjoin demo``, the search-to-click join) at a tiny size: it shows its
progress while it runs (stage lines, then one line per micro-batch on stderr), and its summary."""

from __future__ import annotations

import re

import pytest

from streamjoin.jobs.cli import build_parser
from streamjoin.jobs.search_clicks import run_job

pytestmark = pytest.mark.spark


def test_demo_job_prints_a_line_per_micro_batch(spark, tmp_path, capsys):
    args = build_parser().parse_args(["demo", "--searches", "300", "--batches", "3", "--partitions", "2",
                                      "--store", "memory", "--workdir", str(tmp_path)])
    run_job(args, spark=spark)
    out, err = capsys.readouterr()
    assert [line[:4] for line in out.splitlines() if line.startswith("[")] == ["[1/4", "[3/4", "[4/4"]
    batches = re.findall(r"micro-batch (\d+): ([\d,]+) rows in, ([\d,]+) joined rows out, (.*)", err)
    assert [int(b[0]) for b in batches] == [0, 1, 2, 3]   # 3: the run's trailing no-data micro-batch
    assert sum(int(b[1].replace(",", "")) for b in batches) > 300   # every search and click
    assert batches[0][3] == "no join watermark yet" and batches[-1][3].startswith("join watermark 20")
    assert "streaming result equals the batch join of the on-time events: yes" in out
