"""The worker's freeze of long-lived objects before a task (no Spark: it is plain ``gc``)."""

from __future__ import annotations

import gc
import sys
import weakref
from typing import Iterator

import pytest

from streamjoin.spark import worker_gc


class _Node:
    """An object that can sit in a reference cycle."""

    def __init__(self) -> None:
        self.other: object = self


@pytest.fixture
def reused(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A reused PySpark worker's environment, with the module's counts reset; unfrozen after."""
    monkeypatch.setenv("SPARK_REUSE_WORKER", "1")
    monkeypatch.setattr(worker_gc, "_state", {"modules": -1, "tasks": 0, "pid": -1})
    try:
        yield
    finally:
        gc.unfreeze()


def test_worker_gc_freezes_at_the_first_task_and_after_new_imports_only(reused: None) -> None:
    assert worker_gc.before_task()
    assert gc.get_freeze_count() > 0
    assert not worker_gc.before_task()   # nothing imported since
    sys.modules.pop("colorsys", None)
    __import__("colorsys")
    assert worker_gc.before_task()
    assert not worker_gc.before_task()


def test_worker_gc_leaves_a_tasks_new_objects_to_the_collector(reused: None) -> None:
    worker_gc.before_task()
    node = _Node()   # made after the freeze: a cycle the next collection frees
    gone = weakref.ref(node)
    del node
    gc.collect()
    assert gone() is None


def test_worker_gc_reclaims_a_frozen_cycle_within_refreeze_tasks(reused: None) -> None:
    node = _Node()
    gone = weakref.ref(node)
    worker_gc.before_task()   # the cycle is alive, so it is frozen with the rest
    del node
    gc.collect()
    assert gone() is not None   # a frozen cycle outlives collections
    done = [worker_gc.before_task() for _ in range(worker_gc.REFREEZE_TASKS - 1)]
    assert done == [False] * (worker_gc.REFREEZE_TASKS - 2) + [True]   # the 50th task's
    assert gone() is None
    assert gc.get_freeze_count() > 0   # and the rest frozen again


def test_worker_gc_does_nothing_in_a_worker_that_is_not_reused(reused: None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_REUSE_WORKER")
    frozen = gc.get_freeze_count()
    assert not worker_gc.before_task()
    assert gc.get_freeze_count() == frozen
