"""A private MariaDB server for the tests: Debian's ``mariadbd`` (or the one
in ``MCP_TEST_MARIADB_BIN``) on a copy of a data folder ``mariadb-install-db``
made once per test session, on a free loopback TCP port, no service. ``root`` connects from
127.0.0.1 without a password (``--auth-root-authentication-method=normal``,
as a developer's throwaway server would); the redo log is not flushed at each
commit (tests need no durability against power loss: a crash of the server's
process still loses nothing committed, the log is written to the OS at once).
One server serves the whole test session (:func:`shared_mariadb`). As root,
both programs run as ``nobody`` (mariadbd refuses root unless told). Every
process stopped here was started here, by its PID."""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pymysql
from conftest import free_port, unavailable

#: The database the server is made with (a URL without one names it).
DATABASE = "flask_mcp"


def binaries() -> tuple[Path, Path]:
    """``mariadbd`` and ``mariadb-install-db``; a skip (a failure in CI) when they are missing."""
    configured = os.environ.get("MCP_TEST_MARIADB_BIN")
    folders = [configured] if configured else ["/usr/sbin", "/usr/bin", *os.environ.get("PATH", "").split(":")]
    server = next((Path(f) / name for f in folders if f for name in ("mariadbd", "mysqld")
                   if (Path(f) / name).is_file()), None)
    install = next((Path(f) / name for f in folders if f for name in ("mariadb-install-db", "mysql_install_db")
                    if (Path(f) / name).is_file()), None)
    if server is None or install is None:
        unavailable("MariaDB's mariadbd and mariadb-install-db are not installed (apt install mariadb-server, "
                    "or set MCP_TEST_MARIADB_BIN to the folder holding them)")
    return server, install


def _as_server_user() -> list[str]:
    """The command prefix that drops root (mariadbd will not run as root unless told to)."""
    if os.getuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--reset-env"]


#: What both programs get: no option files of the machine's, small buffers (the tests' tables are tiny).
_SERVER_OPTIONS = ["--no-defaults", "--skip-name-resolve", "--innodb-buffer-pool-size=32M",
                   "--innodb-log-file-size=8M"]


class MariaDBServer:
    """``mariadbd`` on a data folder of its own (a fresh install's copy), on a free port."""

    def __init__(self, *, max_connections: int = 300) -> None:
        self.server, self.install = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-mariadb-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.max_connections = max_connections
        self.process: subprocess.Popen[bytes] | None = None
        if os.getuid() == 0:
            shutil.chown(self.folder, "nobody", "nogroup")

    def url(self, database: str = DATABASE) -> str:
        return f"mysql+pymysql://root@127.0.0.1:{self.port}/{database}?charset=utf8mb4"

    def connect(self, database: str | None = None) -> Any:
        """A PyMySQL connection as ``root`` (autocommit)."""
        return pymysql.connect(host="127.0.0.1", port=self.port, user="root", database=database,
                               autocommit=True, connect_timeout=5)

    def execute(self, statement: str, database: str | None = None) -> list[tuple[object, ...]]:
        connection = self.connect(database)
        try:
            with connection.cursor() as cursor:
                cursor.execute(statement)
                return list(cursor.fetchall())
        finally:
            connection.close()

    def start(self) -> MariaDBServer:
        if not (self.data / "mysql").is_dir():
            self._install()
        log = (self.folder / "mariadb.log").open("ab")
        command = [*_as_server_user(), str(self.server), *_SERVER_OPTIONS, f"--datadir={self.data}",
                   f"--socket={self.folder / 'mariadb.sock'}", f"--pid-file={self.folder / 'mariadb.pid'}",
                   "--bind-address=127.0.0.1", f"--port={self.port}", "--skip-log-bin",
                   "--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0",
                   f"--max-connections={self.max_connections}"]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                self.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4")
                return self
            except pymysql.err.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop(remove=False)
                    raise RuntimeError(f"mariadbd did not start:\n{self.log()}") from None
                time.sleep(0.05)

    def _install(self) -> None:
        """A copy of the session's freshly installed data folder (installing
        takes seconds: the system tables, their help texts, InnoDB's files)."""
        done = subprocess.run([*_as_server_user(), "cp", "-a", str(_template(self.install)), str(self.data)],
                              capture_output=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"copying the installed data folder failed: {done.stderr.decode(errors='replace')}")

    def log(self) -> str:
        path = self.folder / "mariadb.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        self.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
        return self.url(name)

    def crash(self, *, lose_data: bool) -> None:
        """Kill the server at once (what a crash looks like to clients);
        ``lose_data``: its data folder goes too (a new, empty server starts on :meth:`recover`)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
        if lose_data:
            shutil.rmtree(self.data)

    def recover(self) -> None:
        """Start again on the same port (a new, empty server if the data was lost)."""
        self.start()

    def stop(self, *, remove: bool = True) -> None:
        """A clean shutdown (SIGTERM), then a kill if it takes too long."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)


_installed: Path | None = None


def _template(install: Path) -> Path:
    """A data folder ``mariadb-install-db`` made, once per test session, removed at exit."""
    global _installed
    if _installed is None or not (_installed / "mysql").is_dir():
        folder = Path(tempfile.mkdtemp(prefix="flask-mcp-mariadb-install-"))
        if os.getuid() == 0:
            shutil.chown(folder, "nobody", "nogroup")
        data = folder / "data"
        command = [*_as_server_user(), str(install), *_SERVER_OPTIONS, f"--datadir={data}",
                   "--auth-root-authentication-method=normal", "--skip-test-db"]
        done = subprocess.run(command, capture_output=True, cwd=folder, timeout=120)
        if done.returncode != 0:
            shutil.rmtree(folder, ignore_errors=True)
            raise RuntimeError(f"mariadb-install-db failed: {done.stdout.decode(errors='replace')}"
                               f"{done.stderr.decode(errors='replace')}")
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        _installed = data
    return _installed


_shared: MariaDBServer | None = None


def shared_mariadb() -> MariaDBServer:
    """The test session's server, started on first use and stopped at exit."""
    global _shared
    if _shared is None or _shared.process is None or _shared.process.poll() is not None:
        server = MariaDBServer()
        try:
            server.start()
        except BaseException:
            server.stop()
            raise
        _shared = server
        atexit.register(server.stop)
    return _shared


_contract_database: str | None = None


def contract_database() -> str:
    """The URL of the MariaDB database the contract cases share (one per test
    session); each case starts with its tables emptied (``empty_sql_tables``)."""
    global _contract_database
    server = shared_mariadb()
    prefix = f"mysql+pymysql://root@127.0.0.1:{server.port}/"
    if _contract_database is None or not _contract_database.startswith(prefix):
        _contract_database = server.create_database("contract")
    return _contract_database
