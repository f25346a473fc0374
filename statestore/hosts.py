"""Where an arranged store's files live: a *host* (``ArrangedStore``'s ``host`` option).

An arranged store (``streamjoin.statestore.arranged``) is a manifest naming immutable files: a
base's values and keys and one run per write. Its host keeps them:

* ``"directory"`` (``DirectoryHost``, the default): each file is a file of the store's
  directory, the manifest a file replaced by a rename; a base is read through a memory map. A
  run the store is given as a file (a changelog's delta) is linked there where it can be.
* ``"lmdb"`` (``LMDBHost``): the manifest and the runs are values of one LMDB database in the
  store's directory (``arranged.mdb``); a base stays a pair of files of the directory beside it,
  read through a memory map as on the directory host. A run is read from LMDB's own memory map
  with no copy. A read holds an LMDB read transaction for as long as the buffer it returned
  lives, so a value removed meanwhile keeps its pages until nothing reads it. The map is reserved
  at ``LMDB_MAP_SIZE`` (address space, not disk or memory: the database file grows with its
  contents) and never resized, because a resize would move the pages live buffers point into.
  A version's run is put in the transaction that replaces the manifest naming it, so a write is
  one LMDB transaction; files no longer named are removed in the next one. A base is not copied
  into LMDB: LMDB builds a value in the writer's memory until its transaction commits (a 400 MB
  base took a worker from 80 MB to 848 MB resident while it was put), and keeps a large value in
  contiguous pages; a file written a chunk at a time and mapped costs neither, and a restore
  links the changelog's snapshot as a base's values as the directory host does. (``writemap``,
  which would write a value into the map instead, turns a full disk into a crash, ``SIGBUS``.)

* ``"rocksdb"`` (``RocksDBHost``): the manifest and the runs are values of one RocksDB database
  (the directory ``arranged.rocksdb`` in the store's directory), a version's run and its
  manifest one ``WriteBatch``; a base stays a pair of files beside it, as on the LMDB host. A
  run is read as a copy (RocksDB hands out its values as new bytes), which the store applies to
  its delta at open and then drops.

A host only stores bytes under names; the manifest's sizes and CRCs, the order of writes and
what a name means stay the store's. Files too large to build in memory (a base, written a chunk
at a time by ``streamjoin.statestore.sorted_base.BaseWriter``) are written into the directory
first and then handed to the host with ``FileHost.seal``; every host keeps them there.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from streamjoin.statestore.checksum import crc32
from streamjoin.statestore.chunks import SourceFile
from streamjoin.statestore.crc_file import write_in_pieces
from streamjoin.statestore.errors import StoreArgumentError
from streamjoin.statestore.sorted_base import DATA, KEYS, remove_file

__all__ = ["FileHost", "DirectoryHost", "LMDBHost", "RocksDBHost", "open_host", "HOSTS", "LMDB_FILE", "LMDB_MAP_SIZE",
           "ROCKSDB_DIR"]

MANIFEST = "MANIFEST"
#: The LMDB host's database file in the store directory (its lock file adds ``-lock``).
LMDB_FILE = "arranged.mdb"
#: Address space an LMDB host's map reserves (1 TiB): the most one store may hold.
LMDB_MAP_SIZE = 1 << 40
#: The RocksDB host's database directory in the store directory.
ROCKSDB_DIR = "arranged.rocksdb"
#: Values from this size on (runs) go to the RocksDB host's blob files.
_BLOB_BYTES = 4096


class FileHost:
    """The files of one arranged store, by name (see module). ``FileNotFoundError`` from a read
    of a name that is not there; ``OSError`` for any other failure."""

    #: names in the store directory that say a store of this host is there
    markers: tuple[str, ...] = ()

    def __init__(self, path: str, sync: bool) -> None:
        """The host of the store directory ``path`` (which exists); ``sync``: fsync every write."""
        self._path, self._sync = path, sync

    def read(self, name: str) -> pa.Buffer:
        """The bytes of ``name``, mapped where the host can (no copy), valid while referenced."""
        raise NotImplementedError

    def write(self, name: str, data: Any) -> None:
        """Store ``data`` (bytes-like) as the new file ``name``."""
        raise NotImplementedError

    def seal(self, name: str) -> None:
        """Take the directory's file ``name``, just written in full, as the host's file ``name``."""
        raise NotImplementedError

    def place(self, name: str, source: SourceFile) -> None:
        """Store ``source``'s bytes as the file ``name`` (no copy where the host can share them)."""
        raise NotImplementedError

    def keep(self, name: str, source: SourceFile) -> None:
        """Store ``source``'s bytes as the new file ``name`` where the host keeps a write's files
        (a run): ``write`` of its bytes, or ``place`` on a host that keeps them as files."""
        self.write(name, source.data)

    def remove(self, name: str) -> None:
        """Remove ``name`` if it is there."""
        raise NotImplementedError

    def names(self) -> set[str]:
        """Every file held, the manifest and the host's own files excluded."""
        raise NotImplementedError

    def read_manifest(self) -> bytes | None:
        """The manifest's bytes, None when there is none."""
        raise NotImplementedError

    def write_manifest(self, data: bytes) -> object:
        """Replace the manifest with ``data`` atomically; its ``manifest_identity`` now."""
        raise NotImplementedError

    def manifest_identity(self) -> object:
        """Something that changes when anything but this host replaces or removes the manifest."""
        raise NotImplementedError

    def close(self) -> None:
        """Release the host (buffers it returned stay readable until dropped)."""


class DirectoryHost(FileHost):
    """Each file a file of the store's directory (see module)."""

    markers = (MANIFEST,)

    def _at(self, name: str) -> str:
        return os.path.join(self._path, name)

    def read(self, name: str) -> pa.Buffer:
        return pa.memory_map(self._at(name)).read_buffer()

    def write(self, name: str, data: Any) -> None:
        _write_bytes(self._at(name), data, self._sync)

    def seal(self, name: str) -> None:
        pass   # already the directory's file

    def place(self, name: str, source: SourceFile) -> None:
        _place_file(self._at(name), source, self._sync)

    def keep(self, name: str, source: SourceFile) -> None:
        self.place(name, source)

    def remove(self, name: str) -> None:
        remove_file(self._at(name))

    def names(self) -> set[str]:
        return {entry for entry in os.listdir(self._path) if entry.endswith((DATA, KEYS)) or entry == MANIFEST + ".new"}

    def read_manifest(self) -> bytes | None:
        try:
            with open(self._at(MANIFEST), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_manifest(self, data: bytes) -> object:
        target = self._at(MANIFEST)
        _write_bytes(target + ".new", data, self._sync)
        os.replace(target + ".new", target)
        return self.manifest_identity()

    def manifest_identity(self) -> object:
        return _file_key(self._at(MANIFEST))


class _Environment:
    """One process's LMDB environment of a store's database file, shared by every open of it in
    the process (LMDB allows one per process and file) and closed once no store and no buffer
    uses it."""

    def __init__(self, path: str) -> None:
        import lmdb

        file = os.path.join(path, LMDB_FILE)
        _check_length(file, 2 * _PAGE)   # (LMDB reads its two meta pages as it opens)
        self.env = lmdb.open(file, subdir=False, map_size=LMDB_MAP_SIZE, max_dbs=0, sync=False, metasync=False,
                             readahead=False, lock=True)
        try:
            with _lmdb_errors(path, "opening"):
                _check_length(file, (self.env.info()["last_pgno"] + 1) * self.env.stat()["psize"])
                self.env.reader_check()   # free the reader slots of processes that died reading (they pin pages)
        except OSError:
            self.env.close()
            raise
        self.key = _file_key(file)
        self.users = 0


#: The smallest page LMDB writes (its meta pages are one each).
_PAGE = 4096


def _check_length(file: str, needed: int) -> None:
    """Raise ``OSError`` when the database ``file`` exists and is shorter than ``needed`` bytes:
    LMDB reads its pages through a memory map, and reading one past the end of a truncated file
    kills the process with ``SIGBUS`` instead of raising."""
    try:
        size = os.stat(file).st_size
    except FileNotFoundError:
        return
    if 0 < size < needed:
        raise OSError(f"{file} is truncated to {size} bytes, its pages need {needed}")


class _Lease:
    """A read transaction, kept open while a buffer that points into it lives."""

    def __init__(self, owner: _Environment) -> None:
        self._owner = owner
        self.txn = owner.env.begin(buffers=True)
        with _ENVIRONMENTS_LOCK:
            owner.users += 1

    def __del__(self) -> None:
        self.txn.abort()
        _release(self._owner)


#: The open environments, by their database file's device and inode: a directory removed and
#: made again (a store rebuilt) has a new file and gets a new environment.
_ENVIRONMENTS: dict[tuple[int, int], _Environment] = {}
_ENVIRONMENTS_LOCK = threading.RLock()   # re-entered when a lease dies during a collection


def _file_key(file: str) -> tuple[int, int] | None:
    """The file's device and inode; None where there is none."""
    try:
        found = os.stat(file)
    except FileNotFoundError:
        return None
    return found.st_dev, found.st_ino


def _acquire(path: str) -> _Environment:
    with _ENVIRONMENTS_LOCK:
        key = _file_key(os.path.join(path, LMDB_FILE))
        found = _ENVIRONMENTS.get(key) if key is not None else None
        if found is None:
            found = _Environment(path)
            if found.key is not None:
                _ENVIRONMENTS[found.key] = found
        found.users += 1
        return found


def _release(owner: _Environment) -> None:
    with _ENVIRONMENTS_LOCK:
        owner.users -= 1
        if owner.users:
            return
        if owner.key is not None and _ENVIRONMENTS.get(owner.key) is owner:
            del _ENVIRONMENTS[owner.key]
    owner.env.close()


class _DatabaseHost(FileHost):
    """The manifest and the runs as values of a database in the store directory, the bases as
    files beside it (see module). A write and a removal are held back for the transaction that
    replaces the manifest: a run no manifest names is of no use, and nothing reads a removed file
    (names are never reused). Subclasses give the database's five operations."""

    #: what the database is called in errors
    database = ""

    def __init__(self, path: str, sync: bool) -> None:
        super().__init__(path, sync)
        #: writes (bytes) and removals (None) held back for the next transaction
        self._pending: dict[str, Any] = {}
        self._closed = False

    # -- the database's operations ----------------------------------------------------------------

    def _get(self, name: str) -> pa.Buffer | None:
        """The value ``name`` (None: not held), for reading the store's files."""
        raise NotImplementedError

    def _commit(self, changes: list[tuple[str, Any]]) -> None:
        """Put (bytes) or delete (None) each of ``changes`` in one transaction."""
        raise NotImplementedError

    def _fresh(self, name: str) -> bytes | None:
        """The value ``name`` as bytes, read anew (None: not held)."""
        raise NotImplementedError

    def _held(self) -> set[str]:
        """Every name the database holds, read anew."""
        raise NotImplementedError

    def _release(self) -> None:
        """Close the database."""
        raise NotImplementedError

    # -- FileHost ---------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise OSError(f"the {self.database} host of {self._path} is closed")

    def read(self, name: str) -> pa.Buffer:
        """A run or the manifest from the database; a base's file from the directory, mapped."""
        self._check_open()
        if name in self._pending:
            self._flush()
        found = self._get(name)
        if found is None:
            return pa.memory_map(os.path.join(self._path, name)).read_buffer()   # FileNotFoundError: neither
        return found

    def _flush(self, *items: tuple[str, Any]) -> None:
        """Commit the writes and removals held back, and ``items``, in one transaction."""
        self._check_open()
        changes = [*self._pending.items(), *items]
        self._pending = {}
        self._commit(changes)

    def write(self, name: str, data: Any) -> None:
        """Held back until the manifest that names it is written, in its transaction."""
        self._pending[name] = data

    def seal(self, name: str) -> None:
        pass   # a base stays a file of the directory (see module)

    def place(self, name: str, source: SourceFile) -> None:
        """A file of the directory, as on the directory host (a base's values: see module)."""
        _place_file(os.path.join(self._path, name), source, self._sync)

    def remove(self, name: str) -> None:
        """A file of the directory at once; a value of the database with the next write."""
        remove_file(os.path.join(self._path, name))
        if self._pending.get(name) is not None:
            del self._pending[name]
        else:
            self._pending[name] = None

    def names(self) -> set[str]:
        self._check_open()
        files = {entry for entry in os.listdir(self._path) if entry.endswith((DATA, KEYS))}
        return (self._held() - {MANIFEST}) | files

    def read_manifest(self) -> bytes | None:
        self._check_open()
        if os.path.exists(os.path.join(self._path, DAMAGED)):
            raise OSError(f"{self._path}: its {self.database} database met damaged pages in an earlier use ({DAMAGED})")
        return self._fresh(MANIFEST)

    def write_manifest(self, data: bytes) -> object:
        self._flush((MANIFEST, data))
        return self._database_key(), _content_identity(data)

    def manifest_identity(self) -> object:
        """The database's own file or directory (a store directory swapped under an open store
        brings another one) and the manifest's content."""
        return self._database_key(), _content_identity(self.read_manifest())

    def _database_key(self) -> tuple[int, int] | None:
        return _file_key(os.path.join(self._path, self.markers[0]))

    def close(self) -> None:
        """Commit the removals held back (best effort: the next open removes what no manifest
        names), then close the database."""
        if not self._closed:
            self._pending = {name: None for name, data in self._pending.items() if data is None}
            if self._pending:
                try:
                    self._flush()
                except OSError:
                    pass
            self._closed, self._pending = True, {}
            self._release()


class LMDBHost(_DatabaseHost):
    """The manifest and the runs as values of one LMDB database (see module)."""

    markers = (LMDB_FILE, LMDB_FILE + "-lock")
    database = "LMDB"

    def __init__(self, path: str, sync: bool) -> None:
        super().__init__(path, sync)
        self._owner: _Environment = _acquire(path)
        #: the read transaction of reads since the last write (one LMDB reader for all of them)
        self._lease: _Lease | None = None

    @property
    def _env(self) -> Any:
        return self._owner.env

    def _get(self, name: str) -> pa.Buffer | None:
        """LMDB's own pages, no copy: the buffer keeps its read transaction open."""
        with _lmdb_errors(self._path, f"reading {name}"):
            if self._lease is None:
                self._lease = _Lease(self._owner)
            view = self._lease.txn.get(name.encode())
        if view is None:
            return None
        if not len(view):
            return pa.py_buffer(b"")
        address = np.frombuffer(view, np.uint8).ctypes.data
        return pa.foreign_buffer(address, len(view), base=self._lease)

    def _commit(self, changes: list[tuple[str, Any]]) -> None:
        self._lease = None   # later reads see this write (buffers read before keep their transaction)
        with _lmdb_errors(self._path, f"writing {', '.join(name for name, _ in changes)}"):
            with self._env.begin(write=True) as txn:
                for name, data in changes:
                    if data is None:
                        txn.delete(name.encode())
                    else:
                        txn.put(name.encode(), memoryview(data))
            if self._sync:
                self._env.sync(True)

    def _fresh(self, name: str) -> bytes | None:
        with _lmdb_errors(self._path, f"reading {name}"), self._env.begin() as txn:
            found = txn.get(name.encode())
            return None if found is None else bytes(found)

    def _held(self) -> set[str]:
        with _lmdb_errors(self._path, "listing"), self._env.begin() as txn:
            return {bytes(key).decode() for key in txn.cursor().iternext(keys=True, values=False)}

    def _release(self) -> None:
        self._lease = None
        _release(self._owner)


class RocksDBHost(_DatabaseHost):
    """The manifest and the runs as values of one RocksDB database (see module)."""

    markers = (ROCKSDB_DIR,)
    database = "RocksDB"

    def __init__(self, path: str, sync: bool) -> None:
        from rocksdict import DBCompressionType, Options, Rdict, WriteOptions

        super().__init__(path, sync)
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.set_keep_log_file_num(1)   # every open rolls the info log
        options.set_max_file_opening_threads(1)
        # runs are written once and removed whole: kept in blob files, not rewritten by compactions,
        # and not compressed (Arrow files of keys and packed values)
        options.set_enable_blob_files(True)
        options.set_min_blob_size(_BLOB_BYTES)
        options.set_enable_blob_gc(True)
        options.set_compression_type(DBCompressionType.none())
        with _rocksdb_errors(path, "opening"):
            self._db: Any = Rdict(os.path.join(path, ROCKSDB_DIR), options)
        self._write_options = WriteOptions()
        self._write_options.sync = sync

    def _get(self, name: str) -> pa.Buffer | None:
        """A copy (RocksDB hands out new bytes)."""
        found = self._fresh(name)
        return None if found is None else pa.py_buffer(found)

    def _commit(self, changes: list[tuple[str, Any]]) -> None:
        from rocksdict import WriteBatch

        batch = WriteBatch(raw_mode=True)
        for name, data in changes:
            if data is None:
                batch.delete(name.encode())
            else:
                batch.put(name.encode(), bytes(memoryview(data)))
        with _rocksdb_errors(self._path, f"writing {', '.join(name for name, _ in changes)}"):
            self._db.write(batch, self._write_options)

    def _fresh(self, name: str) -> bytes | None:
        with _rocksdb_errors(self._path, f"reading {name}"):
            found: bytes | None = self._db.get(name.encode())
            return found

    def _held(self) -> set[str]:
        with _rocksdb_errors(self._path, "listing"):
            return {bytes(key).decode() for key in self._db.keys()}

    def _release(self) -> None:
        self._db.close()


#: The hosts by the name ``ArrangedStore``'s ``host`` option takes.
HOSTS: dict[str, type[FileHost]] = {"directory": DirectoryHost, "lmdb": LMDBHost, "rocksdb": RocksDBHost}


def open_host(name: str, path: str, sync: bool) -> FileHost:
    """The host ``name`` of the store directory ``path`` (which exists)."""
    if name not in HOSTS:
        raise StoreArgumentError(f"store kind 'arranged': host={name!r} is not one of {sorted(HOSTS)}")
    return HOSTS[name](path, sync)


def _content_identity(manifest: bytes | None) -> object:
    """An LMDB-held manifest's identity: its size and CRC-32 (None: no manifest)."""
    return None if manifest is None else (len(manifest), crc32(manifest))


@contextmanager
def _lmdb_errors(path: str, what: str) -> Iterator[None]:
    """An LMDB failure as ``OSError`` (a full map says how much it holds); one that says the
    database's pages are damaged also marks the store (:data:`DAMAGED`), so that its next open
    finds it unreadable and the store is rebuilt, where a write that failed on a damaged page
    would otherwise fail again in every retry."""
    import lmdb

    try:
        yield
    except lmdb.MapFullError as exc:
        raise OSError(f"{path}: {what}: the store would hold more than its LMDB map's {LMDB_MAP_SIZE} bytes "
                      f"({exc})") from exc
    except (lmdb.CorruptedError, lmdb.PageNotFoundError, lmdb.BadChecksumError, lmdb.PanicError) as exc:
        _mark_damaged(path)
        raise OSError(f"{path}: {what}: its LMDB database is damaged: {type(exc).__name__}: {exc}") from exc
    except lmdb.Error as exc:
        raise OSError(f"{path}: {what}: {type(exc).__name__}: {exc}") from exc


#: The file a database host leaves in its store directory once its database has shown damage:
#: the next open refuses the store (``read_manifest``), which is then rebuilt from its changelog.
DAMAGED = "DAMAGED"


def _mark_damaged(path: str) -> None:
    try:
        with open(os.path.join(path, DAMAGED), "wb"):
            pass
    except OSError:
        pass   # (the error raised says what happened; a store that cannot be marked fails again)


@contextmanager
def _rocksdb_errors(path: str, what: str) -> Iterator[None]:
    """A RocksDB failure as ``OSError``; one that says the database is damaged (RocksDB's
    ``Corruption`` status) also marks the store, as :func:`_lmdb_errors` does."""
    try:
        yield
    except OSError:
        raise
    except Exception as exc:   # rocksdict raises plain exceptions
        if "Corruption" in str(exc):
            _mark_damaged(path)
        raise OSError(f"{path}: {what}: {exc}") from exc


def _place_file(path: str, source: SourceFile, sync: bool) -> None:
    """``source`` as the file ``path``: a hard link where it is a file on this disk (one inode,
    nothing copied; a file never changes once written), else a copy."""
    if source.path is not None:
        remove_file(path)
        try:
            os.link(source.path, path)
            return
        except OSError:   # another file system, or links not allowed there: copy it
            pass
    _write_bytes(path, source.data, sync)


def _write_bytes(path: str, data: Any, sync: bool) -> None:
    remove_file(path)   # a new file, never a write through a link to a changelog's snapshot (``place``)
    with open(path, "wb") as f:
        write_in_pieces(f, data)
        if sync:
            f.flush()
            os.fsync(f.fileno())
