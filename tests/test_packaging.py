"""The wheel installs one import name, ``streamjoin``, and nothing generic beside it.

Builds the wheel from this checkout, installs it with the PyPI distribution ``changelog`` (whose
top-level module has the name of one of our folders; fetched by pip from its cache or PyPI here,
never a dependency of the project or of an extra) into a fresh virtual environment, and imports
both there. pyspark and the other dependencies come from the test environment's site-packages,
added at the end of the fresh environment's path (its ``.pth`` files, the editable install's
among them, are not run there).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]


def test_pyproject_lists_every_package_folder():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            found.add(".".join((name, *init.parent.relative_to(ROOT / folder).parts)))
    data = {name for name in config["package-data"] if name not in found}   # (folders of data files alone)
    assert found | data == set(config["packages"])


def test_pyproject_extras_install_nothing_named_like_our_folders():
    """An extra is installed into users' environments: no distribution the package does not use
    (such as PyPI's ``changelog``, which the wheel test below installs itself) belongs there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    folders = set(project["tool"]["setuptools"]["package-dir"].values())
    for extra, requirements in project["project"]["optional-dependencies"].items():
        names = {re.split(r"[\s\[<>=!~;]", r, maxsplit=1)[0].lower() for r in requirements}
        assert not names & folders, (extra, names & folders)


@pytest.fixture(scope="module")
def fresh_env(tmp_path_factory) -> Path:
    """A virtual environment holding only the built wheel and PyPI's ``changelog``."""
    tmp = tmp_path_factory.mktemp("wheel")
    # a copy of the sources, so that no build/ folder left in the checkout (with modules since
    # moved or removed) can slip into the wheel, and the checkout stays as it was
    source = tmp / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".hypothesis", ".pytest_cache"))
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(tmp / "dist"), str(source)],
        capture_output=True, text=True,
    )
    assert build.returncode == 0, build.stderr
    wheels = list((tmp / "dist").glob("streamjoin-*.whl"))
    assert len(wheels) == 1, wheels
    env = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    python = env / "bin" / "python"
    # the wheel alone (its dependencies come from this environment, below); PyPI's changelog with
    # its own (its __init__ imports Sphinx), which the project's environment does not have
    for args in (["--no-deps", str(wheels[0])], ["changelog==0.6.2"]):
        install = subprocess.run(
            [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", *args],
            capture_output=True, text=True,
        )
        assert install.returncode == 0, install.stderr
    (_site(env) / "zz_test_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env


def _site(env: Path) -> Path:
    out = subprocess.check_output([str(env / "bin" / "python"), "-c",
                                   "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True)
    return Path(out.strip())


def test_wheel_installs_one_top_level_name(fresh_env):
    site = _site(fresh_env)
    records = [p for p in site.glob("streamjoin-*.dist-info/RECORD")]
    assert len(records) == 1
    tops = {line.split(",")[0].split("/")[0] for line in records[0].read_text().splitlines()}
    tops = {t for t in tops if not t.endswith(".dist-info") and t != ".." and not t.startswith("../")}
    assert tops == {"streamjoin"}
    assert (site / "streamjoin" / "py.typed").exists()
    assert (site / "streamjoin" / "spark" / "jars" / "streamjoin-flush.jar").exists()   # the JVM flush source


def test_wheel_imports_beside_pypi_changelog(fresh_env, tmp_path):
    code = (
        "import changelog, streamjoin, streamjoin.changelog as ours\n"
        "from streamjoin import interval_join, stream_table_join, table_table_join, ChangeFormat\n"
        "from streamjoin.statestore import open_store\n"
        "assert not hasattr(changelog, 'Changelog'), changelog.__file__\n"
        "assert hasattr(ours, 'Changelog')\n"
        "print(streamjoin.__file__)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([str(fresh_env / "bin" / "python"), "-c", code], capture_output=True, text=True,
                            cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert str(_site(fresh_env)) in result.stdout


_USER_CODE = '''
from datetime import timedelta
from pyspark.sql import DataFrame
from streamjoin import interval_join
'''

_USER_CALL = '''

def searches_with_clicks_{n}(searches: DataFrame, clicks: DataFrame) -> DataFrame:
    return interval_join(
        searches, clicks, "session_id", left_time="ts", right_time="ts",
        lower=timedelta(0), upper=timedelta(minutes=30), delay=timedelta(minutes=5), {how},
    )
'''


def _mypy(env: Path, tmp_path: Path, hows: list[str]) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """One mypy run (it reads PySpark's annotations each time: seconds) over a user module with one
    function per ``how`` argument; the run and the error lines of each function."""
    source = tmp_path / "user_pipeline.py"
    code, spans = _USER_CODE, []
    for n, how in enumerate(hows):
        first = code.count("\n") + 1
        code += _USER_CALL.format(n=n, how=how)
        spans.append(range(first, code.count("\n") + 1))
    source.write_text(code)
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--python-executable", str(env / "bin" / "python"),
         "--no-incremental", "--follow-imports=silent", str(source)],
        capture_output=True, text=True, cwd=tmp_path,
    )
    errors = [(int(m.group(1)), m.group(0)) for m in re.finditer(r"^user_pipeline\.py:(\d+): error: .*$",
                                                                result.stdout, re.MULTILINE)]
    return result, [[text for line, text in errors if line in span] for span in spans]


def test_wheel_public_signatures_seen_by_mypy(fresh_env, tmp_path):
    result, (good, typo, spark_spelling, kind) = _mypy(
        fresh_env, tmp_path, ['how="left"', 'hwo="left"', 'how="left_outer"', 'how="fulll"'])
    assert result.returncode == 1, result.stdout + result.stderr   # the two wrong calls, nothing else
    assert good == [] and spark_spelling == [], result.stdout
    assert len(typo) == 1 and 'Unexpected keyword argument "hwo"' in typo[0], result.stdout
    assert len(kind) == 1 and 'Argument "how" to "interval_join" has incompatible type' in kind[0], result.stdout
    assert re.search(r"Found 2 errors in 1 file", result.stdout), result.stdout


def test_public_join_without_pyspark_says_which_extra_to_install(tmp_path):
    code = (
        "import sys\n"
        "class NoSpark:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'pyspark':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, NoSpark())\n"
        "import streamjoin, streamjoin.statestore, streamjoin.changelog\n"
        "from streamjoin.interval.operator import IntervalJoin\n"
        "try:\n"
        "    from streamjoin import interval_join\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert 'pip install "pyspark>=4,<5"' in result.stdout and 'streamjoin[spark]"' in result.stdout
