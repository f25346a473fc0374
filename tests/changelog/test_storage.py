"""Locations and files of the changelog's storage: the URI schemes Spark users write, and a
create-if-absent write that exactly one of several racing writers wins."""

from __future__ import annotations

import os
import threading

import pyarrow.fs as pafs
import pytest

from streamjoin.changelog.storage import filesystem_for, open_storage, resolve_uri


@pytest.mark.parametrize(
    "given, expected",
    [
        ("dbfs:/mnt/ck", "/dbfs/mnt/ck"),
        ("dbfs:///mnt/ck", "/dbfs/mnt/ck"),
        ("file:/data/ck", "/data/ck"),
        ("file:///data/ck", "/data/ck"),
        ("s3a://bucket/ck", "s3://bucket/ck"),
        ("s3n://bucket/ck", "s3://bucket/ck"),
        ("s3://bucket/ck", "s3://bucket/ck"),
        ("gs://bucket/ck", "gs://bucket/ck"),
        ("gcs://bucket/ck", "gs://bucket/ck"),
        ("hdfs://namenode:8020/ck", "hdfs://namenode:8020/ck"),
        ("abfss://box@account.dfs.core.windows.net/ck", "abfss://box@account.dfs.core.windows.net/ck"),
    ],
)
def test_resolve_uri_maps_the_schemes_spark_users_write(given, expected):
    assert resolve_uri(given) == expected


def test_resolve_uri_makes_a_relative_path_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_uri("ck/join") == os.path.join(str(tmp_path), "ck", "join")
    assert resolve_uri(resolve_uri("ck/join")) == resolve_uri("ck/join")


@pytest.mark.parametrize("given", ["foo://bucket/ck", "wasbs://box@account/ck", "rockdb:ck", "s3a:/no-bucket"])
def test_resolve_uri_refuses_what_it_cannot_open(given):
    with pytest.raises(ValueError, match="s3a:|no bucket"):
        resolve_uri(given)


def test_open_storage_dbfs_is_the_local_fuse_path():
    storage = open_storage("dbfs:/streamjoin-test/ck")
    assert storage.uri == "/dbfs/streamjoin-test/ck"
    fs, path = filesystem_for("file:///x/y")
    assert type(fs).__name__ == "LocalFileSystem" and path == "/x/y"


@pytest.mark.parametrize("uri", ["local", "mock"])
def test_storage_write_if_absent_has_one_winner_among_racing_threads(tmp_path, uri):
    root = str(tmp_path / "dir") if uri == "local" else "mock:///race"
    storage = open_storage(root)
    writers = 8
    start = threading.Barrier(writers, timeout=30)
    won: list[int] = []

    def write(i: int) -> None:
        start.wait()
        if storage.write_if_absent("owner.json", f"writer {i}".encode()):
            won.append(i)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    if uri == "local":   # atomic on a local disk; elsewhere a check then a write (documented)
        assert len(won) == 1
        assert storage.read("owner.json").to_pybytes() == f"writer {won[0]}".encode()
    assert [f.name for f in storage.list()] == ["owner.json"]
    assert not storage.write_if_absent("owner.json", b"late")


class _Racing:
    """A filesystem (a real one underneath) on which another writer acts just before each
    ``delete_file`` and ``move``: as two writers on one object-store location race."""

    def __init__(self, fs, before_delete=None, before_move=None):
        self._fs, self.before_delete, self.before_move = fs, before_delete, before_move

    def __getattr__(self, name):
        return getattr(self._fs, name)

    def delete_file(self, path):
        if self.before_delete is not None:
            self.before_delete(path)
        self._fs.delete_file(path)

    def move(self, src, dst):
        if self.before_move is not None:
            self.before_move(src)
        self._fs.move(src, dst)


def test_storage_losing_writer_of_a_race_gets_a_conflict_not_a_file_not_found(tmp_path):
    from streamjoin.changelog.errors import ChangelogConflictError
    from streamjoin.changelog.storage import ArrowStorage

    local = pafs.LocalFileSystem()
    gone = local.delete_file
    storage = ArrowStorage(_Racing(local, before_delete=gone), str(tmp_path), str(tmp_path))
    (tmp_path / "old").write_bytes(b"x")
    storage.delete(["old"])                      # the other writer deleted it first: as asked
    assert not (tmp_path / "old").exists()
    storage = ArrowStorage(_Racing(local, before_move=gone), str(tmp_path), str(tmp_path))
    with pytest.raises(ChangelogConflictError, match=r"file being written as name \(\.tmp-t-.*\) was removed before "
                       r"it could be moved into place: another process is writing this location.*must not share a "
                       r"checkpoint") as raised:
        storage.write_atomic("t", lambda sink: sink.write(b"data"), lambda crc: "name")
    assert raised.value.files == ("name",)
    assert [f.name for f in storage.list()] == []

