"""The package's public surface: ``__all__`` is exactly the public names, errors form one tree."""

from __future__ import annotations

import inspect

import changelog
import changelog.errors


def test_changelog_all_lists_exactly_public_names():
    public = {name for name in vars(changelog) if not name.startswith("_")
              and not inspect.ismodule(getattr(changelog, name))}
    assert set(changelog.__all__) == public
    assert all(hasattr(changelog, name) for name in changelog.__all__)


def test_changelog_errors_form_one_documented_tree():
    classes = [getattr(changelog.errors, n) for n in changelog.errors.__all__]
    assert all(issubclass(c, changelog.errors.ChangelogError) for c in classes)
    for cls in classes:
        assert cls.__name__ in changelog.errors.__doc__, cls


def test_changelog_error_carries_files_and_versions():
    error = changelog.ChecksumMismatchError("x", files=["a"], versions=(3, 4))
    assert (error.files, error.versions) == (("a",), (3, 4))
    assert isinstance(error, changelog.ChangelogCorruptError)


def test_changelog_does_not_import_spark_or_joins():
    import subprocess
    import sys

    code = ("import sys, changelog, changelog.cli; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'joins', 'bench')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
