"""The API reference's docstrings are in the one style mkdocstrings renders (Google style, markdown
cross-references): no public docstring holds a Sphinx role (``:func:``, ``:class:``, ...), which
the reference would show raw; the public functions document their arguments in ``Args:``."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import streamjoin
import streamjoin.testing

ROOT = Path(__file__).resolve().parent.parent
ROLE = re.compile(r":(?:py:)?(?:func|class|mod|meth|attr|data|exc|obj|const|ref):`")
FUNCTIONS = ["interval_join", "stream_table_join", "table_table_join", "progress_metrics", "join_metrics",
             "set_aside_rows", "read_state", "view_sink"]


def _resolve(path: str) -> object:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            value = getattr(value, name)
        return value
    raise ImportError(path)


def _documented(value: object, seen: set[int]) -> list[tuple[str, str]]:
    """(name, docstring) of ``value`` and what the reference renders of it (a module's or class's
    public members defined there)."""
    if id(value) in seen:
        return []
    seen.add(id(value))
    name = getattr(value, "__qualname__", getattr(value, "__name__", repr(value)))
    found = [(name, inspect.getdoc(value) or "")]
    if inspect.ismodule(value) or inspect.isclass(value):
        home = value.__name__ if inspect.ismodule(value) else value.__module__
        for member_name, member in vars(value).items():
            member = getattr(member, "__func__", member)
            if member_name.startswith("_") or getattr(member, "__module__", None) != home:
                continue
            if inspect.isclass(member) or inspect.isfunction(member):
                found += _documented(member, seen)
    return found


def _reference_objects() -> list[object]:
    paths = sorted({m.group(1) for page in (ROOT / "docs").rglob("*.md")
                    for m in re.finditer(r"^::: ([\w.]+)", page.read_text(), re.M)})
    assert len(paths) > 20
    return [_resolve(p) for p in paths] + [getattr(streamjoin, n) for n in streamjoin.__all__ if n != "__version__"] \
        + [getattr(streamjoin.testing, n) for n in streamjoin.testing.__all__]


def test_docstrings_of_the_reference_hold_no_sphinx_role():
    seen: set[int] = set()
    docs = [d for value in _reference_objects() for d in _documented(value, seen)]
    assert len(docs) > 100
    assert sorted({name for name, doc in docs if ROLE.search(doc)}) == []


def test_docstrings_public_functions_have_google_sections():
    for name in FUNCTIONS:
        function = getattr(streamjoin, name)
        doc = inspect.getdoc(function) or ""
        assert "\nArgs:\n" in doc and "\nReturns:\n" in doc, name
        documented = set(re.findall(r"^    (\w+):", doc.split("\nArgs:\n")[1].split("\n\n")[0], re.M))
        assert documented == set(inspect.signature(function).parameters), name
