"""A throw-away PostgreSQL cluster for the jobs, the benchmarks and the tests.

:func:`start_cluster` runs ``initdb`` in a new temporary directory, configures logical decoding
(``wal_level = logical``, the wal2json plugin), and starts the server on its own port, listening on
localhost and a socket in that directory only. PostgreSQL refuses to run as root: started as root,
the cluster's directory is given to the unprivileged ``postgres`` user and every server command runs
as that user (``runuser``). :meth:`Cluster.stop` stops the server; :meth:`Cluster.restart` stops and
starts it on the same port and data (what a database restart looks like to a client);
:meth:`Cluster.destroy` also removes the directory.

Raises :class:`streamjoin.cdc.errors.ServerBinariesMissing` (saying how to install them) when
``initdb``/``pg_ctl`` or the wal2json plugin are not installed.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass

from streamjoin.cdc.errors import CdcError, ServerBinariesMissing

__all__ = ["Cluster", "start_cluster", "find_server_binaries", "INSTALL_HINT"]

#: How to install what a cluster needs, on Debian or Ubuntu.
INSTALL_HINT = ("install PostgreSQL 15 and the wal2json plugin: "
                "apt-get install -y postgresql-15 postgresql-15-wal2json (Debian/Ubuntu), "
                "or set STREAMJOIN_PG_BIN to the directory holding initdb and pg_ctl")
_CONF = """
listen_addresses = 'localhost'
port = {port}
unix_socket_directories = '{socket_dir}'
wal_level = logical
max_replication_slots = 20
max_wal_senders = 20
fsync = off
full_page_writes = off
shared_buffers = 64MB
max_connections = 50
"""


def find_server_binaries() -> str:
    """The directory holding ``initdb`` and ``pg_ctl``: ``$STREAMJOIN_PG_BIN``, else the newest
    ``/usr/lib/postgresql/*/bin``, else the ``PATH``. Raises :class:`ServerBinariesMissing`."""
    candidates = [os.environ.get("STREAMJOIN_PG_BIN", "")]
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=_version, reverse=True)
    on_path = shutil.which("pg_ctl")
    candidates.append(os.path.dirname(os.path.realpath(on_path)) if on_path else "")
    for directory in candidates:
        if directory and all(os.access(os.path.join(directory, b), os.X_OK) for b in ("initdb", "pg_ctl")):
            return directory
    raise ServerBinariesMissing(f"PostgreSQL's server programs (initdb, pg_ctl) were not found; {INSTALL_HINT}")


def _version(path: str) -> float:
    try:
        return float(path.split("/")[-2])
    except ValueError:
        return 0.0


def _wal2json_installed(bindir: str) -> bool:
    libdir = subprocess.run([os.path.join(bindir, "pg_config"), "--pkglibdir"], capture_output=True, text=True)
    where = libdir.stdout.strip() if libdir.returncode == 0 else os.path.join(os.path.dirname(bindir), "lib")
    return os.path.exists(os.path.join(where, "wal2json.so"))


def _knows_setting(bindir: str, name: str) -> bool:
    """Whether this build of the server has the setting ``name`` (some builds add settings)."""
    command = [os.path.join(bindir, "postgres"), "--describe-config"]
    if os.geteuid() == 0:
        command = ["runuser", "-u", "postgres", "--", *command]
    done = subprocess.run(command, capture_output=True, text=True)
    return any(line.split("\t", 1)[0] == name for line in done.stdout.splitlines())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Cluster:
    """A running throw-away cluster: its directory, port, binaries and the user it runs as."""

    root: str
    port: int
    bindir: str
    run_as: str | None
    dbname: str = "postgres"
    user: str = "postgres"

    @property
    def data(self) -> str:
        return os.path.join(self.root, "data")

    @property
    def dsn(self) -> str:
        """A libpq connection string for the cluster's database (TCP on localhost)."""
        return f"host=127.0.0.1 port={self.port} dbname={self.dbname} user={self.user}"

    def _run(self, *args: str) -> None:
        command = [os.path.join(self.bindir, args[0]), *args[1:]]
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise CdcError(f"{' '.join(args[:2])} failed for the cluster in {self.root}: "
                           f"{(done.stderr or done.stdout).strip()[-800:]}")

    def start(self) -> None:
        """Start the server and wait until it accepts connections."""
        self._run("pg_ctl", "start", "-w", "-t", "60", "-D", self.data, "-l", os.path.join(self.root, "server.log"))

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``fast``: roll back open transactions; ``immediate``: like a crash)."""
        self._run("pg_ctl", "stop", "-w", "-t", "60", "-m", mode, "-D", self.data)

    def restart(self, mode: str = "fast") -> None:
        """Stop and start the server on the same data and port."""
        self.stop(mode)
        self.start()

    def destroy(self) -> None:
        """Stop the server if it runs and remove the cluster's directory."""
        if os.path.exists(os.path.join(self.data, "postmaster.pid")):
            try:
                self.stop("immediate")
            except CdcError:
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> "Cluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.destroy()


def start_cluster(prefix: str = "streamjoin-pg-") -> Cluster:
    """initdb a new cluster under the temporary directory and start it (see module docstring)."""
    bindir = find_server_binaries()
    if not _wal2json_installed(bindir):
        raise ServerBinariesMissing(f"the wal2json decoding plugin is not installed for {bindir}; {INSTALL_HINT}")
    run_as = "postgres" if os.geteuid() == 0 else None
    root = tempfile.mkdtemp(prefix=prefix, dir=tempfile.gettempdir())
    if run_as:
        os.chmod(root, 0o755)
        shutil.chown(root, run_as, run_as)
    cluster = Cluster(root, _free_port(), bindir, run_as, user="postgres")
    try:
        cluster._run("initdb", "-D", cluster.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync")
        with open(os.path.join(cluster.data, "postgresql.conf"), "a") as conf:
            conf.write(_CONF.format(port=cluster.port, socket_dir=root))
            if _knows_setting(bindir, "output_plugin_libraries"):  # a server that lists the plugins it allows
                conf.write("output_plugin_libraries = 'pgoutput, test_decoding, wal2json'\n")
        cluster.start()
    except BaseException:
        cluster.destroy()
        raise
    return cluster
