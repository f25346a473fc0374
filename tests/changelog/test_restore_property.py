"""Property: whatever the history, compactions, retention and crashes, restore(v) is the model at v.

A history is a list of steps: append the next version's write, rewrite an existing version (a batch
executed again with other output), compact at some version with some retention, or crash (a
temporary file left half-written by an interrupted append or compaction). Afterwards every version
the log reports as restorable is restored into the backend under test and compared with a dict
replayed to that version; and the newest ``retain`` versions are always among them.
"""

from __future__ import annotations

import os
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamjoin.changelog import Changelog, RestoreMethod, compact, restore
from streamjoin.statestore import destroy_store, open_store
from tests.changelog.model import BACKENDS, Model
from tests.changelog.strategies import writes

steps = st.lists(
    st.one_of(
        st.tuples(st.just("write"), writes),
        st.tuples(st.just("rewrite"), st.integers(0, 20), writes),
        st.tuples(st.just("compact"), st.integers(0, 20), st.integers(2, 4)),
        st.tuples(st.just("crash"), st.binary(max_size=40)),
    ),
    min_size=1,
    max_size=12,
)


def _run(log: Changelog, start: int, history: list) -> tuple[Model, int]:
    """Play ``history`` on ``log``; return the model and the oldest version retention must keep."""
    model, keep_from = Model(), start
    for step in history:
        if step[0] == "write" or (step[0] == "rewrite" and not model.states):
            version, write = (model.newest + 1 if model.states else start), step[-1]
            log.append(version, write.puts, write.deletes, write.delete_ranges)
            model.apply(version, write)
        elif step[0] == "rewrite":
            _rewrite(log, model, step[1], step[2])
        elif step[0] == "compact" and model.states:
            versions = log.versions()
            compact(log, versions[step[1] % len(versions)], retain_versions=step[2])
            keep_from = max(keep_from, model.newest - step[2] + 1)
        elif step[0] == "crash":
            os.makedirs(log.uri, exist_ok=True)
            name = f".tmp-delta-{(model.newest or start) + 1:020d}-{uuid.uuid4().hex[:6]}"
            with open(os.path.join(log.uri, name), "wb") as fh:
                fh.write(step[1])  # an append interrupted before its move
    return model, keep_from


def _rewrite(log: Changelog, model: Model, pick: int, write) -> None:
    """Append an existing version again (a batch executed again), as the runtime may."""
    versions = log.versions()
    candidates = [v for v in versions if v == 0 or v - 1 in versions]
    if not candidates:
        return
    version = candidates[pick % len(candidates)]
    same = version in log.delta_versions() and model.writes.get(version) == write
    log.append(version, write.puts, write.deletes, write.delete_ranges)
    if not same:  # identical bytes keep the later history; anything else replaces it
        model.apply(version, write)


@pytest.mark.parametrize("backend", BACKENDS)
@given(history=steps, start=st.sampled_from([0, 3]),
       method=st.sampled_from([None, RestoreMethod.MERGED, RestoreMethod.BULK_AND_WRITES]))
def test_restore_every_retained_version_equals_model(tmp_path_factory, backend, history, start, method):
    root = tmp_path_factory.mktemp("prop")
    log = Changelog(str(root / "log"), retain_versions=3)
    model, keep_from = _run(log, start, history)
    versions = log.versions()
    if model.newest is None:
        assert versions == []
        return
    origin = {start - 1} if start > 0 else set()  # a log starting at k > 0 starts from empty at k-1
    assert set(range(keep_from, model.newest + 1)) <= set(versions) <= set(model.states) | origin
    path = str(root / "store")
    for version in versions:
        destroy_store(backend, path)
        with open_store(backend, path) as store:
            stats = restore(log, store, version, method=method)
            assert dict(store.scan()) == model.states.get(version, {}), (version, stats)
            assert store.version == version
    destroy_store(backend, path)
