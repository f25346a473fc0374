"""The documentation's code: every fenced ``python`` block in docs/ and the README is marked
(run in process, run with Spark, or not run with the reason), the marked ones run as written, and
every import the pages show (in a block or in inline code) imports in a clean interpreter, so a
page that names a wrong module fails here and not in a user's hands."""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]

#: a fenced block: its info string's first word is the language
FENCE = re.compile(r"^```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^```[ \t]*$", re.M | re.S)
#: the marker on the line before a python block
MARKER = re.compile(r"^<!-- example: (?P<mode>run with spark|run|not run: \S.*?) -->[ \t]*$")
#: an import statement written in inline code in the prose
INLINE_IMPORT = re.compile(r"`((?:from [\w.]+ import [\w, ]+)|(?:import [\w.]+(?: as \w+)?))`")


@dataclass(frozen=True)
class Example:
    page: str
    line: int
    mode: str            # "run", "run with spark", "not run: ..." or "" (unmarked)
    code: str

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


def examples(pages: list[Path] = PAGES) -> list[Example]:
    """Every fenced python block of ``pages``, with the marker on the line before it ("" if none)."""
    found = []
    for page in pages:
        text = page.read_text()
        for match in FENCE.finditer(text):
            if match.group("lang") not in ("python", "py"):
                continue
            before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            marker = MARKER.match(before)
            found.append(Example(os.path.relpath(page, ROOT), text.count("\n", 0, match.start()) + 1,
                                 marker.group("mode") if marker else "", match.group("body")))
    return found


def imports(pages: list[Path] = PAGES) -> list[str]:
    """Every import statement the pages show: top-level imports of every python block, and inline code."""
    found: list[str] = []
    for page in pages:
        found += INLINE_IMPORT.findall(page.read_text())
    for example in examples(pages):
        tree = ast.parse(example.code)
        found += [ast.unparse(node) for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    return sorted(set(found))


ALL = examples()


def test_docs_every_python_block_is_marked():
    unmarked = [e.id for e in ALL if not e.mode]
    assert not unmarked, ("python blocks without <!-- example: run | run with spark | not run: REASON --> "
                          f"on the line before them: {unmarked}")


def test_docs_examples_include_runnable_ones():
    assert {e.mode for e in ALL} >= {"run", "run with spark"}
    assert [e.page for e in ALL if e.mode == "run with spark"].count("README.md") == 3


def test_docs_imports_work_in_a_clean_interpreter(tmp_path):
    # run outside the checkout, isolated (-I), so that the repository's folders (joins/, bench/, ...)
    # are not importable by their folder names: only what an installed streamjoin provides
    script = ("import json, sys\nfailed = {}\nfor stmt in json.loads(sys.argv[1]):\n"
              "    try:\n        exec(stmt, {})\n    except Exception as e:\n"
              "        failed[stmt] = f'{type(e).__name__}: {e}'\nprint(json.dumps(failed))\n")
    statements = imports()
    done = subprocess.run([sys.executable, "-I", "-c", script, json.dumps(statements)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, env=os.environ | {"PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {}
    assert len(statements) > 10


def test_docs_imports_catch_a_wrong_module(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("Keep a view with `from joins import view_sink`.\n\n<!-- example: not run: a sketch -->\n"
                    "```python\nimport streamjoin\nsink = streamjoin.view_sink(...)\n```\n")
    assert imports([page]) == ["from joins import view_sink", "import streamjoin"]


@pytest.mark.parametrize("example", [e for e in ALL if e.mode == "run"], ids=lambda e: e.id)
def test_docs_example_runs(example, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(example.code, example.id, "exec"), {"__name__": "__docs_example__"})


@pytest.mark.spark
@pytest.mark.parametrize("example", [e for e in ALL if e.mode == "run with spark"], ids=lambda e: e.id)
def test_docs_example_runs_with_spark(example, streamjoin_spark, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(example.code, example.id, "exec"), {"__name__": "__docs_example__", "spark": streamjoin_spark})


def test_docs_readme_links_only_absolute_urls():
    # the README is the package index's project page, where a relative link or image does not resolve
    text = (ROOT / "README.md").read_text()
    targets = re.findall(r"\]\(([^)\s]+)", text) + re.findall(r"<img[^>]+src=\"([^\"]+)", text)
    assert [t for t in targets if not re.match(r"https?://", t)] == []


def test_docs_readme_stays_a_front_door():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250


#: ``pip install`` of streamjoin by its name, which finds nothing: it is not published on PyPI
FROM_PYPI = re.compile(r"pip install \"?streamjoin(?:\[|[\s\"]|$)", re.M)


def test_docs_install_from_a_checkout_or_a_wheel_never_from_pypi():
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        text = page.read_text()
        assert FROM_PYPI.findall(text) == [], page.name
        assert 'pip install "/path/to/streamjoin[spark]"' in text, page.name
    started = (ROOT / "docs" / "getting-started.md").read_text()
    assert "pip wheel --no-deps" in started
    from streamjoin import __version__
    assert set(re.findall(r"streamjoin-(\d[\w.]*)-py3-none-any\.whl", started)) == {__version__}
    assert FROM_PYPI.findall("\n".join(p.read_text() for p in PAGES)) == []


def test_docs_coming_from_spark_says_where_late_rows_differ_with_the_example_a_test_runs():
    page = (ROOT / "docs" / "coming-from" / "spark.md").read_text()
    section = page.split("## Late rows: where results differ", 1)[1].split("\n## ", 1)[0]
    assert "*previous* micro-batch (N-1)" in section and "the micro-batch the row arrives in (N)" in section
    assert "| 2 | | `s1` at 9:15 | 9:20 | 8:50 |" in section   # the worked example's row
    test = (ROOT / "tests" / "joins" / "spark" / "test_interval.py").read_text()
    assert "def test_interval_join_sets_aside_a_click_that_spark_joins_one_micro_batch_after" in test


#: a repository path written in a page: folders, a name, a source or page extension
REPO_PATH = re.compile(r"(?<![\w/~:-])((?:\.\.?/)*(?:[\w.-]+/)+[\w.-]+\.(?:py|md|sh|toml|java|cfg))\b")
#: paths a user chooses (examples of their own files), not the repository's
USER_PATH = re.compile(r"^(?:my|your|path/to|tmp|app|jobs?/my)[\w/-]*|/my_|example_")


def _missing_paths(page: Path) -> list[str]:
    files = set(subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split())
    missing = []
    for match in REPO_PATH.finditer(page.read_text()):
        path = match.group(1)
        if USER_PATH.search(path):
            continue
        beside = (page.parent / path).resolve()
        if beside.exists() or path in files or any(f.endswith("/" + path) for f in files):
            continue
        missing.append(path)
    return missing


def test_docs_name_only_files_that_exist():
    missing = {page.relative_to(ROOT).as_posix(): _missing_paths(page) for page in PAGES}
    assert {p: m for p, m in missing.items() if m} == {}


def test_docs_wide_code_blocks_scroll_instead_of_being_cut_off():
    # Material's own style lets a long line of a code block or an API signature run past a 1280 px page
    config = (ROOT / "mkdocs.yml").read_text()
    sheets = re.findall(r"^extra_css:\n((?:  - .+\n)+)", config, re.M)
    assert sheets, "mkdocs.yml has no extra_css"
    css = "".join((ROOT / "docs" / line.strip()[2:]).read_text() for line in sheets[0].splitlines())
    assert re.search(r"pre > code \{[^}]*overflow-x: auto", css)
    assert re.search(r"\.doc-signature[^{]*\{[^}]*white-space: pre-wrap", css)
