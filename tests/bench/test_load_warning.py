"""Every ``streamjoin bench`` command warns, with the figure, when the machine's load average is
above 1.5 times its CPU count (the load is injected here; nothing is timed)."""

from __future__ import annotations

from streamjoin.bench import harness
from streamjoin.jobs.cli import main


def test_load_warning_names_the_load_above_one_and_a_half_times_the_cpus():
    warning = harness.load_warning([3.01, 1.0, 1.0], cpus=2)
    assert warning is not None and "load average 3.01 on 2 CPUs (above 3.0)" in warning
    assert harness.load_warning([3.0, 9.0, 9.0], cpus=2) is None        # the 1-minute figure decides
    assert harness.load_warning([], cpus=2) is None                     # a system without one


def test_load_warning_printed_by_every_bench_command(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(harness, "_load", lambda: [12.5, 8.0, 4.0])
    monkeypatch.setattr(harness.os, "cpu_count", lambda: 2)
    main(["bench", "report", "--out", str(tmp_path), "--results", str(tmp_path / "none")])
    err = capsys.readouterr().err
    assert err.count("load average 12.50 on 2 CPUs") == 2                # before the run and after it

    monkeypatch.setattr(harness, "_load", lambda: [0.5, 0.5, 0.5])
    main(["bench", "report", "--out", str(tmp_path), "--results", str(tmp_path / "none")])
    assert "load average" not in capsys.readouterr().err
