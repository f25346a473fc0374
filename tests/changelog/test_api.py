"""The package's public surface: ``__all__`` is exactly the public names, errors form one tree."""

from __future__ import annotations

import inspect

import streamjoin.changelog
import streamjoin.changelog.errors


def test_changelog_all_lists_exactly_public_names():
    public = {name for name in vars(streamjoin.changelog) if not name.startswith("_")
              and not inspect.ismodule(getattr(streamjoin.changelog, name))}
    assert set(streamjoin.changelog.__all__) == public
    assert all(hasattr(streamjoin.changelog, name) for name in streamjoin.changelog.__all__)


def test_changelog_errors_form_one_documented_tree():
    classes = [getattr(streamjoin.changelog.errors, n) for n in streamjoin.changelog.errors.__all__]
    assert all(issubclass(c, streamjoin.changelog.errors.ChangelogError) for c in classes)
    for cls in classes:
        assert cls.__name__ in streamjoin.changelog.errors.__doc__, cls


def test_changelog_error_carries_files_and_versions():
    error = streamjoin.changelog.ChecksumMismatchError("x", files=["a"], versions=(3, 4))
    assert (error.files, error.versions) == (("a",), (3, 4))
    assert isinstance(error, streamjoin.changelog.ChangelogCorruptError)


def test_changelog_does_not_import_spark_or_joins():
    import subprocess
    import sys

    code = ("import sys, streamjoin.changelog, streamjoin.changelog.cli; "
            "allowed = ('streamjoin', 'streamjoin.changelog', 'streamjoin.statestore'); "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'pyspark' or (m.startswith('streamjoin') "
            "and not any(m == a or m.startswith(a + '.') for a in allowed[1:]) and m != 'streamjoin')]; "
            "print(bad); sys.exit(1 if bad else 0)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
