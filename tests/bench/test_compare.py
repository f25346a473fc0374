"""``streamjoin bench compare``: reading both sides' results, medians and ratios, load warnings, and
refusing clearly when the other revision lacks the benchmark or an option (no Spark, no timing)."""

from __future__ import annotations

import sys

import pytest

from streamjoin.bench import compare, harness
from streamjoin.bench.cli import BENCHMARKS

NEW = {"benchmark": "runtime", "columns": ["variant", "median s", "rows/s", "fixed s"],
       "rows": [{"variant": "floor", "median s": 2.0, "rows/s": 1000.0, "fixed s": 1.0},
                {"variant": "streamjoin runtime, memory", "median s": 4.0, "rows/s": 500.0, "fixed s": 2.5}]}
# a results file as 0.1 wrote it: no "columns", no fixed cost
OLD = {"benchmark": "runtime", "rows": [{"variant": "floor", "median s": 3.0, "rows/s": 800.0},
                                        {"variant": "streamjoin runtime, memory", "median s": "-", "rows/s": 400}]}


def test_compare_results_path_takes_the_last_results_line():
    out = "table\nresults: /tmp/a.json\nmore\nresults: /tmp/b.json\n"
    assert compare.results_path(out) == "/tmp/b.json"
    assert compare.results_path("no results here\n") is None


def test_compare_figures_keys_numeric_cells_by_row_label():
    assert compare.figures(NEW)[("streamjoin runtime, memory", "fixed s")] == 2.5
    old = compare.figures(OLD)   # no "columns": the first row's keys, "-" left out
    assert old == {("floor", "median s"): 3.0, ("floor", "rows/s"): 800.0,
                   ("streamjoin runtime, memory", "rows/s"): 400.0}


def test_compare_figures_label_rows_by_their_leading_text_columns():
    nexmark = {"columns": ["query", "variant", "median s"],
               "rows": [{"query": "q3", "variant": "spark", "median s": 8.0},
                        {"query": "q3", "variant": "streamjoin-rocksdb", "median s": 15.0}]}
    assert compare.figures(nexmark) == {("q3 / spark", "median s"): 8.0, ("q3 / streamjoin-rocksdb", "median s"): 15.0}


def test_compare_headline_fields_per_benchmark_or_chosen():
    assert compare.headline_fields("runtime", NEW) == ["median s", "batches s", "fixed s"]
    assert compare.headline_fields("interval", NEW)[0] == "seconds"
    assert compare.headline_fields("stores", NEW) == ["median s"]
    assert compare.headline_fields("stores", NEW, "all") == ["median s", "rows/s", "fixed s"]
    assert compare.headline_fields("runtime", NEW, "rows/s,fixed s") == ["rows/s", "fixed s"]


def test_compare_table_medians_and_ratio_this_over_other():
    other = [compare.figures(OLD), {("floor", "median s"): 5.0}, {("floor", "median s"): 4.0}]
    this = [compare.figures(NEW), {("floor", "median s"): 2.0, ("floor", "fixed s"): 3.0}]
    rows = {(r["row"], r["figure"]): r for r in compare.compare_table(other, this, ["median s", "fixed s"], "0.1")
            .as_records()}
    floor = rows[("floor", "median s")]
    assert floor["0.1 runs"] == "3.00 5.00 4.00"
    assert (floor["0.1 median"], floor["this median"], floor["this / 0.1"]) == (4.0, 2.0, 0.5)
    fixed = rows[("floor", "fixed s")]   # 0.1 reports no fixed cost: its side is "-", no ratio
    assert (fixed["0.1 median"], fixed["this median"], fixed["this / 0.1"]) == ("-", 2.0, "-")
    assert rows[("streamjoin runtime, memory", "median s")]["0.1 runs"] == "-"


def test_compare_load_warning_above_the_limit_only():
    load = compare.parse_loadavg("3.10 1.20 0.80 2/345 6789\n")
    assert load == (3.1, 1.2, 0.8)
    # compare flags a run with the one warning every benchmark prints
    assert "load average 3.10 on 2 CPUs (above 3.0)" in str(harness.load_warning(load, cpus=2))
    assert harness.load_warning((2.4, 9.0, 9.0), cpus=2) is None


def test_compare_missing_options_names_what_the_help_lacks():
    help_text = "usage: streamjoin bench runtime [-h] [--rows ROWS]\n  --rows ROWS  input rows\n  --repeat N, -r N\n"
    assert compare.missing_options(["--rows", "20000", "--stores=memory", "--repeat", "1"], help_text) == ["--stores"]


FAKE = """import sys
args = sys.argv[1:]
if args[:2] == ["bench", "runtime"] and "--help" in args:
    print("usage: streamjoin bench runtime [--rows ROWS]")
elif args == ["bench", "--help"]:
    print("benchmarks: runtime")
else:
    sys.exit("streamjoin bench: error: argument NAME: invalid choice: " + repr(args[1]))
"""


@pytest.fixture
def old_side(tmp_path):
    script = tmp_path / "fake_streamjoin.py"
    script.write_text(FAKE)
    return compare.Side("f9fb3a2^ (abcdef0)", (sys.executable, str(script)), sys.executable)


def test_compare_check_side_says_when_the_revision_lacks_the_benchmark(old_side, tmp_path):
    with pytest.raises(compare.CompareError, match=r"f9fb3a2\^ \(abcdef0\) has no benchmark 'interval'.*invalid choice"):
        compare.check_side(old_side, "interval", ["--rows", "10"], str(tmp_path))


def test_compare_check_side_says_when_the_revision_lacks_an_option(old_side, tmp_path):
    with pytest.raises(compare.CompareError, match=r"`streamjoin bench runtime` has no option --stores"):
        compare.check_side(old_side, "runtime", ["--rows", "10", "--stores", "memory"], str(tmp_path))
    compare.check_side(old_side, "runtime", ["--rows", "10"], str(tmp_path))   # all its options: no error


def test_bench_cli_lists_compare():
    assert BENCHMARKS["compare"][0] == "streamjoin.bench.compare"


def test_compare_reads_the_results_line_of_bench_rescale(capsys, tmp_path, monkeypatch):
    import argparse
    import tempfile

    from streamjoin.bench import rescale
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))   # its results stay out of the real ones
    rescale.run(argparse.Namespace(rows=200, partitions=2, repeat=1, store="memory"))
    path = compare.results_path(capsys.readouterr().out)
    assert path is not None and path.startswith(str(tmp_path)) and path.endswith(".json")


def test_compare_error_lines_lift_a_failed_runs_cause_above_its_tail():
    stderr = "starting\npy4j.protocol.Py4JJavaError: task failed\n" + "  +- plan line\n" * 3
    shown = compare.error_lines(stderr)
    assert "py4j.protocol.Py4JJavaError: task failed\n" in shown and "plan line" not in shown
    assert compare.error_lines("all well\n") == ""
