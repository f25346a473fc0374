"""``checkpoint migrate``: a checkpoint written by streamjoin 0.2 (format 1; the fixtures of
tests/fixtures/format1, made by its generate.py from 0.2's own code) is migrated offline and the
join continues on it with the output a run of this streamjoin gives uninterrupted from the start,
on another partition count too, with its local stores gone (rebuilt from the old changelogs)."""

from __future__ import annotations

import functools
import json
import os
import shutil
import types
from pathlib import Path

import pyarrow as pa
import pytest

from streamjoin.changes import ChangeFormat
from streamjoin.enrichment.operator import EnrichmentJoin, layout_for
from streamjoin.errors import CheckpointMismatchError
from streamjoin.interval.operator import IntervalJoin
from streamjoin.jobs.cli import main
from streamjoin.runtime.checkpoint import Checkpoint
from streamjoin.runtime.inspect import check_checkpoint, describe_checkpoint, stage_checkpoints
from streamjoin.runtime.migrate import OLD_ROOT, migrate
from streamjoin.runtime.options import StateConfig
from streamjoin.runtime.plan_runner import PlanRunner
from streamjoin.table.operator import TableTableJoin
from tests.fixtures.format1 import data

FIXTURES = os.path.join(os.path.dirname(data.__file__))
#: (a 0.2 checkpoint keeps the enrichment's buckets layout, as ``layout_for`` finds it)
API = types.SimpleNamespace(ChangeFormat=ChangeFormat, EnrichmentJoin=functools.partial(EnrichmentJoin, layout="buckets"),
                            IntervalJoin=IntervalJoin, TableTableJoin=TableTableJoin)


def _copy(tmp_path, name: str) -> str:
    target = str(tmp_path / name)
    shutil.copytree(os.path.join(FIXTURES, name), target)
    return target


def _by_version(table: pa.Table, versions: range) -> list[list[tuple]]:
    rows = table.to_pylist()
    return [sorted((tuple(sorted((k, v) for k, v in r.items() if k != "_version")) for r in rows
                    if r["_version"] == version), key=repr) for version in versions]


def _tagged(outputs: list[pa.Table], first: int) -> pa.Table:
    return pa.concat_tables([o.append_column("_version", pa.array([first + i] * o.num_rows, pa.int64()))
                             for i, o in enumerate(outputs)])


def _runner(join, checkpoint: str, partitions: int, store: str, local: str) -> PlanRunner:
    config = StateConfig(store=store, local_dir=local, snapshot_every=2)
    return PlanRunner(join.plan, checkpoint, partitions=partitions, config=config, query_id="q")


@pytest.mark.parametrize("name", sorted(data.JOINS))
@pytest.mark.parametrize("partitions,store", [(2, "arranged"), (3, "rocksdb-kv")])
def test_migrate_continues_a_0_2_checkpoint_as_an_uninterrupted_run(tmp_path, name, partitions, store):
    make, batches = data.JOINS[name]
    join, inputs = make(API), batches()
    checkpoint = _copy(tmp_path, name)
    migrations = [migrate(Checkpoint(uri), partitions=partitions) for uri in stage_checkpoints(checkpoint)]
    assert {(m.from_format, m.version, m.old_partitions, m.partitions) for m in migrations} == \
        {(1, data.BEFORE - 1, data.PARTITIONS, partitions)}
    for uri in stage_checkpoints(checkpoint):
        assert check_checkpoint(uri).problems == []
    if name == "enrichment":
        assert layout_for(checkpoint, None) == "buckets"
    continued = _runner(join, checkpoint, partitions, store, str(tmp_path / "local"))
    continued.version = data.BEFORE
    after = [continued.run(*rows) for rows in inputs[data.BEFORE:]]
    after.append(continued.run(*(t.schema.empty_table() for t in inputs[0]), final=True))

    reference = _runner(join, str(tmp_path / "reference"), partitions, store, str(tmp_path / "reference-local"))
    expected = [reference.run(*rows) for rows in inputs]
    expected.append(reference.run(*(t.schema.empty_table() for t in inputs[0]), final=True))

    # 0.2's own output of the versions it ran, in the columns it had (a table join's view changes
    # carry _change_timestamp since), then this streamjoin's after the migration
    old = pa.ipc.open_file(os.path.join(FIXTURES, f"{name}.outputs.arrow")).read_all()
    before = range(data.BEFORE)
    assert _by_version(old, before) == _by_version(_tagged(expected, 0).select(old.column_names), before)
    rest = range(data.BEFORE, data.VERSIONS + 1)
    assert _by_version(_tagged(after, data.BEFORE), rest) == _by_version(_tagged(expected, 0), rest)
    assert sum(o.num_rows for o in after) > 0
    for uri in stage_checkpoints(checkpoint):
        assert check_checkpoint(uri).problems == []
        assert describe_checkpoint(uri).partitions == partitions


def test_migrate_is_needed_and_named_when_a_0_2_checkpoint_is_run(tmp_path):
    checkpoint = _copy(tmp_path, "table")
    join = data.table_join(API)
    with pytest.raises(CheckpointMismatchError,
                       match=r"streamjoin 0.2 \(format 1\).*`streamjoin checkpoint migrate .*table`"):
        _runner(join, checkpoint, 2, "memory", str(tmp_path / "local"))


def test_migrate_keeps_the_old_root_and_replaces_the_records(tmp_path):
    checkpoint = _copy(tmp_path, "interval")
    old = json.loads(open(os.path.join(checkpoint, "streamjoin.json")).read())
    migration = migrate(Checkpoint(checkpoint))
    root = json.loads(open(os.path.join(checkpoint, "streamjoin.json")).read())
    assert root["format"] == 2 and root["migrated_from"] == 1 and root["key_groups"] == 4096
    assert root["definition"] == old["definition"] and root["partitions"] == old["partitions"]
    assert json.loads(open(os.path.join(checkpoint, OLD_ROOT)).read()) == old
    assert not os.path.exists(os.path.join(checkpoint, "progress"))
    assert not os.path.exists(os.path.join(checkpoint, "metrics"))
    cp = Checkpoint(checkpoint)
    assert migration.records == data.BEFORE * data.PARTITIONS
    assert cp.commits.versions() == list(range(data.BEFORE))
    assert [m["version"] for m in cp.commits.read_metrics()] == sorted(list(range(data.BEFORE)) * data.PARTITIONS)
    again = migrate(Checkpoint(checkpoint))   # nothing left to do
    assert again.from_format is None and again.version == data.BEFORE - 1


def test_migrate_refuses_a_running_query_and_an_unknown_format(tmp_path):
    checkpoint = _copy(tmp_path, "enrichment")
    newest = os.path.getmtime(os.path.join(checkpoint, "metrics", f"v={data.BEFORE - 1}"))
    with pytest.raises(CheckpointMismatchError, match=r"committed version 3 \d+ s ago: a query looks to be running"):
        migrate(Checkpoint(checkpoint), now=newest + 5)
    path = os.path.join(checkpoint, "streamjoin.json")
    root = json.loads(open(path).read())
    with open(path, "w") as fh:
        json.dump({**root, "format": 7}, fh)
    with pytest.raises(CheckpointMismatchError, match="has format 7; this streamjoin migrates format 1"):
        migrate(Checkpoint(checkpoint))


def test_migrate_cut_short_is_finished_by_running_it_again(tmp_path):
    checkpoint = _copy(tmp_path, "enrichment")
    cp = Checkpoint(checkpoint)
    original = cp.files.read_json("streamjoin.json")
    migrate(cp)
    # as if the migration had stopped after its new root, before removing the old records
    shutil.copytree(os.path.join(FIXTURES, "enrichment", "progress"), os.path.join(checkpoint, "progress"))
    assert migrate(Checkpoint(checkpoint)).from_format is None
    assert not os.path.exists(os.path.join(checkpoint, "progress"))
    # as if it had stopped before its new root: everything is written again from the old records
    other = _copy(tmp_path / "b", "enrichment")
    shutil.copytree(os.path.join(checkpoint, "commits"), os.path.join(other, "commits"))
    assert migrate(Checkpoint(other)).from_format == 1
    assert Checkpoint(other).files.read_json(OLD_ROOT) == original


def test_migrate_cli_migrates_every_stage_and_prints_what_it_did(tmp_path, capsys):
    checkpoint = _copy(tmp_path, "table")
    before = sorted(str(p.relative_to(checkpoint)) for p in Path(checkpoint).rglob("*"))
    assert main(["checkpoint", "migrate", checkpoint, "--force", "--dry-run"]) == 0
    assert "8 commit records to write" in capsys.readouterr().out
    assert sorted(str(p.relative_to(checkpoint)) for p in Path(checkpoint).rglob("*")) == before
    assert main(["checkpoint", "migrate", checkpoint, "--force"]) == 0
    out = capsys.readouterr().out
    for stage in ("left_keys", "right_keys", "join"):
        assert f"{checkpoint}/{stage}: format 1 -> 2" in out
    assert "run the query" in out
    assert main(["checkpoint", "verify", checkpoint]) == 0
    assert main(["checkpoint", "migrate", checkpoint, "--force"]) == 0
    assert "already format 2" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["interval", "table"])
def test_migrate_leaves_a_version_some_partitions_committed_to_the_next_run(tmp_path, name):
    """0.2 stopped while committing its last version (partition 1 had not written its records of
    it, partition 0 had, with its changelog delta): the migration keeps the version before, and
    the run executing the last version again gives what an uninterrupted run gives."""
    make, batches = data.JOINS[name]
    join, inputs = make(API), batches()
    checkpoint = _copy(tmp_path, name)
    last = data.BEFORE - 1
    for uri in stage_checkpoints(checkpoint):
        os.remove(os.path.join(uri, "metrics", f"v={last}", "p=1.json"))
        for progress in (os.path.join(uri, "progress", "p=1", f"v={last}.json"),):
            if os.path.exists(progress):
                os.remove(progress)
        for delta in os.listdir(os.path.join(uri, "state", "p=1")):
            if delta.startswith(f"delta-{last:020d}") or delta.startswith(f"snapshot-{last:020d}"):
                os.remove(os.path.join(uri, "state", "p=1", delta))
    assert {migrate(Checkpoint(uri)).version for uri in stage_checkpoints(checkpoint)} == {last - 1}
    continued = _runner(join, checkpoint, data.PARTITIONS, "arranged", str(tmp_path / "local"))
    continued.version = last
    after = [continued.run(*rows) for rows in inputs[last:]]
    reference = _runner(join, str(tmp_path / "reference"), data.PARTITIONS, "arranged", str(tmp_path / "ref-local"))
    expected = [reference.run(*rows) for rows in inputs]
    rest = range(last, data.VERSIONS)
    assert _by_version(_tagged(after, last), rest) == _by_version(_tagged(expected, 0), rest)


def test_migrate_works_on_an_object_store_checkpoint(tmp_path, moto_s3):
    """The migration reads and writes through the checkpoint's filesystem: an s3:// checkpoint
    (a local S3 server) migrates and continues as a local one."""
    import pyarrow.fs as pafs

    make, batches = data.JOINS["enrichment"]
    join, inputs = make(API), batches()
    s3 = pafs.S3FileSystem(endpoint_override=os.environ["AWS_ENDPOINT_URL"], access_key="testing",
                           secret_key="testing", region="us-east-1")
    pafs.copy_files(os.path.join(FIXTURES, "enrichment"), "streamjoin-test/enrichment",
                    source_filesystem=pafs.LocalFileSystem(), destination_filesystem=s3)
    checkpoint = f"{moto_s3}/enrichment"
    with pytest.raises(CheckpointMismatchError, match="checkpoint migrate"):
        _runner(join, checkpoint, 2, "arranged", str(tmp_path / "local"))
    assert migrate(Checkpoint(checkpoint)).version == data.BEFORE - 1
    assert check_checkpoint(checkpoint).problems == []
    assert s3.get_file_info(pafs.FileSelector("streamjoin-test/enrichment/progress", allow_not_found=True)) == []
    continued = _runner(join, checkpoint, 2, "arranged", str(tmp_path / "local"))
    continued.version = data.BEFORE
    after = [continued.run(*rows) for rows in inputs[data.BEFORE:]]
    reference = _runner(join, str(tmp_path / "reference"), 2, "arranged", str(tmp_path / "ref-local"))
    expected = [reference.run(*rows) for rows in inputs]
    rest = range(data.BEFORE, data.VERSIONS)
    assert _by_version(_tagged(after, data.BEFORE), rest) == _by_version(_tagged(expected, 0), rest)
