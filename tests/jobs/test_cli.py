"""The ``streamjoin`` command itself: ``--version``, ``--help``, and output into a pipe whose reader has gone."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamjoin import __version__
from streamjoin.jobs.cli import PIPE_CLOSED, main
from tests.changelog.test_logging_store import WRITES, Runner


def test_cli_version_prints_the_installed_version(capsys):
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"streamjoin {__version__}\n"


def test_cli_version_is_newer_than_the_releases_whose_checkpoints_the_docs_migrate():
    docs = Path(__file__).resolve().parents[2] / "docs" / "operations"
    older = {tuple(map(int, m)) for page in ("upgrades.md", "checkpoints.md")
             for m in re.findall(r"written by\s+streamjoin\s+(\d+)\.(\d+)", (docs / page).read_text())}
    assert older, "the docs name the releases whose checkpoints are migrated"
    assert tuple(map(int, __version__.split(".")[:2])) > max(older)


@pytest.mark.parametrize("command", ["demo", "enrich-activity", "timeline", "postgres-cdc", "checkpoint", "changelog",
                                     "bench compare", "bench latency"])
def test_cli_help_reads_as_plain_text(command, capsys):
    with pytest.raises(SystemExit) as info:
        main([*command.split(), "--help"])
    shown = capsys.readouterr().out
    assert info.value.code == 0 and shown.startswith("usage: streamjoin")
    assert not re.search(r"``|:(func|mod|class|data|meth|attr):`", shown), shown


def _into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess:
    """Run ``streamjoin args`` with stdout a pipe whose read end is closed (as after ``| head``)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "streamjoin.jobs.cli", *args], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)


@pytest.fixture
def log_uri(tmp_path) -> str:
    runner = Runner("memory", str(tmp_path))
    for version, write in enumerate(WRITES):
        runner.batch(version, write)
    return runner.log.uri


@pytest.mark.parametrize("args", [["changelog", "inspect", "--json", "LOG"], ["changelog", "inspect", "LOG"],
                                  ["changelog", "verify", "LOG"]])
def test_cli_output_into_a_closed_pipe_ends_quietly_with_the_sigpipe_status(args, log_uri):
    result = _into_closed_pipe([log_uri if a == "LOG" else a for a in args])
    assert (result.returncode, result.stderr) == (PIPE_CLOSED, "")


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["changelog", "restore", "--help"]])
def test_cli_argparse_output_into_a_closed_pipe_ends_quietly(args):
    result = _into_closed_pipe(args)   # argparse drops what it cannot write, and exits 0
    assert (result.returncode, result.stderr) == (0, "")


def test_cli_usage_on_stderr_keeps_its_status_with_stdout_closed():
    result = _into_closed_pipe(["changelog"])
    assert result.returncode == 2 and "Traceback" not in result.stderr and "inspect" in result.stderr
