"""Fixtures for the changelog tests: every contract test runs on every store backend."""

from __future__ import annotations

import os
from typing import Callable, Iterator

import pytest

from streamjoin.statestore import Store, destroy_store, open_store
from tests.changelog.model import BACKENDS


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The store kind under test."""
    return request.param


@pytest.fixture
def make_store(tmp_path, backend: str) -> Iterator[Callable[[str], Store]]:
    """``make_store(name)``: a fresh store of the backend under test at ``tmp_path/name``."""
    opened: list[Store] = []
    paths: list[str] = []

    def make(name: str) -> Store:
        path = os.path.join(str(tmp_path), "stores", name)
        destroy_store(backend, path)
        store = open_store(backend, path)
        opened.append(store)
        paths.append(path)
        return store

    yield make
    for store in opened:
        store.close()
    for path in paths:
        destroy_store(backend, path)
