"""The public namespaces: ``streamjoin`` and ``streamjoin.testing`` hold their public names and
nothing else (``__all__`` is exactly them, ``dir()`` shows no typing helper), and every error a
streamjoin module defines derives from the one root, ``streamjoin.StreamjoinError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import types

import pytest

import streamjoin
import streamjoin.testing
from streamjoin.changelog.errors import ChangelogError
from streamjoin.errors import JoinError
from streamjoin.statestore.errors import StoreError

_HELPERS = {"Any", "TYPE_CHECKING", "annotations", "typing", "importlib"}


@pytest.mark.parametrize("package", [streamjoin, streamjoin.testing], ids=lambda p: p.__name__)
def test_public_api_namespace_is_all_and_only_all(package):
    public = sorted(package._LAZY) + sorted(n for n, v in vars(package).items()
                                           if not n.startswith("_") and not isinstance(v, types.ModuleType))
    assert sorted(set(public)) == sorted(n for n in package.__all__ if not n.startswith("__"))
    assert dir(package) == sorted(package.__all__)
    assert not _HELPERS & set(dir(package))
    for name in package.__all__:
        assert getattr(package, name) is not None


def test_public_api_every_error_derives_from_streamjoin_error():
    root = streamjoin.StreamjoinError
    assert all(issubclass(family, root) for family in (JoinError, StoreError, ChangelogError))
    found = set()
    for info in pkgutil.walk_packages(streamjoin.__path__, "streamjoin."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (not name.startswith("_") and inspect.isclass(value) and issubclass(value, BaseException)
                    and value.__module__.startswith("streamjoin")):
                found.add(value)
    assert len(found) > 30
    assert [e.__qualname__ for e in found if not issubclass(e, root)] == []
