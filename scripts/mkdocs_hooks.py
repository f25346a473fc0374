"""MkDocs hook: lays out the installed package's import tree for the API reference.

The repository's folders are mapped into one import name by pyproject.toml (``joins/`` is
``streamjoin``, ``statestore/`` is ``streamjoin.statestore``, ...). mkdocstrings reads the source
statically (nothing is imported, no Spark starts), so it needs a folder that looks like the
installed package: ``build/api-src/streamjoin``, made of symbolic links into the checkout.
"""

from __future__ import annotations

import os
import re
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "build", "api-src")


def package_tree(root: str = ROOT, into: str = SOURCE) -> str:
    """Make ``into/streamjoin`` mirror the package as installed, from pyproject.toml's package-dir; return ``into``."""
    with open(os.path.join(root, "pyproject.toml")) as fh:
        line = re.search(r"^package-dir = \{(.*)\}$", fh.read(), re.M)
    if line is None:
        raise SystemExit("pyproject.toml has no one-line [tool.setuptools] package-dir = { ... }: the API reference needs it")
    package_dir = dict(re.findall(r'"([\w.]+)"\s*=\s*"([\w/.-]+)"', line.group(1)))
    top = os.path.join(into, "streamjoin")
    os.makedirs(top, exist_ok=True)
    for name in os.listdir(top):
        os.unlink(os.path.join(top, name))
    base = os.path.join(root, package_dir["streamjoin"])
    for name in os.listdir(base):
        if name != "__pycache__":
            os.symlink(os.path.join(base, name), os.path.join(top, name))
    for package, folder in package_dir.items():
        if package != "streamjoin":
            os.symlink(os.path.join(root, folder), os.path.join(top, package.split(".", 1)[1]))
    return into


def on_startup(**_: Any) -> None:
    package_tree()
