"""A private PostgreSQL cluster for the tests: Debian's binaries (or any on
``PATH``, or in ``MCP_TEST_POSTGRES_BIN``), ``initdb`` into a temporary
folder, ``postgres`` on a free loopback port with trust authentication and
no fsync (tests need no durability against power loss; commits are still
written to the WAL before they return, so a crash of the server's processes
loses nothing committed). One cluster serves the whole test session
(:func:`shared_postgres`); a test that crashes its server starts its own.
``initdb`` refuses to run as root, so as root both run as ``nobody``. Every
process stopped here was started here, by its PID."""

from __future__ import annotations

import atexit
import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from conftest import free_port, unavailable

from flask_mcp.backends.sql import SqlDatabase, metadata
from flask_mcp.backends.sql.sessions import stamps_file

#: The user ``initdb`` makes the superuser, and the clients' user.
USER = "postgres"


def binaries() -> Path:
    """The folder of ``initdb`` and ``postgres``; a skip (a failure in CI) when there is none."""
    configured = os.environ.get("MCP_TEST_POSTGRES_BIN")
    candidates = [configured] if configured else sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    on_path = shutil.which("initdb")
    if not configured and on_path:
        candidates.append(str(Path(on_path).parent))
    for folder in candidates:
        if folder and (Path(folder) / "initdb").is_file() and (Path(folder) / "postgres").is_file():
            return Path(folder)
    unavailable("PostgreSQL's initdb and postgres are not installed (apt install postgresql, "
                "or set MCP_TEST_POSTGRES_BIN to the folder holding them)")


def _as_server_user() -> list[str]:
    """The command prefix that drops root (initdb and postgres refuse it)."""
    if os.getuid() != 0:
        return []
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--reset-env"]


class PostgresCluster:
    """``initdb`` + ``postgres`` in a folder of its own, on a free port."""

    def __init__(self, *, max_connections: int = 200) -> None:
        self.bin = binaries()
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-pg-"))
        self.data = self.folder / "data"
        self.port = free_port()
        self.max_connections = max_connections
        self.process: subprocess.Popen[bytes] | None = None
        #: Every database made here (their session change-stamp files go at the end).
        self.databases = ["postgres"]
        if os.getuid() == 0:
            shutil.chown(self.folder, "nobody", "nogroup")

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={database} connect_timeout=5"

    def start(self) -> PostgresCluster:
        if not (self.data / "PG_VERSION").exists():
            self._initdb()
        log = (self.folder / "postgres.log").open("ab")
        command = [*_as_server_user(), str(self.bin / "postgres"), "-D", str(self.data), "-k", str(self.folder),
                   "-h", "127.0.0.1", "-p", str(self.port), "-c", "fsync=off", "-c", "full_page_writes=off",
                   "-c", f"max_connections={self.max_connections}"]
        self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.folder)
        log.close()
        deadline = time.monotonic() + 60
        while True:
            try:
                psycopg.connect(self.dsn(), autocommit=True).close()
                return self
            except psycopg.OperationalError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop(remove=False)
                    raise RuntimeError(f"postgres did not start:\n{self.log()}") from None
                time.sleep(0.05)

    def _initdb(self) -> None:
        command = [*_as_server_user(), str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", USER,
                   "-E", "UTF8", "--locale=C.UTF-8", "--no-sync"]
        done = subprocess.run(command, capture_output=True, cwd=self.folder, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"initdb failed: {done.stderr.decode(errors='replace')}")

    def log(self) -> str:
        path = self.folder / "postgres.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def create_database(self, prefix: str = "t") -> str:
        """A new, empty database; its URL."""
        name = f"{prefix}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}" STRATEGY = FILE_COPY')
        self.databases.append(name)
        return self.url(name)

    def listeners(self, database: str | None = None) -> list[tuple[int, str]]:
        """``(pid, query)`` of every connection whose last statement was a LISTEN."""
        with psycopg.connect(self.dsn(), autocommit=True) as connection:
            rows = connection.execute(
                "SELECT pid, query FROM pg_stat_activity WHERE query ILIKE 'LISTEN %%'"
                + (" AND datname = %s" if database else ""), (database,) if database else ()
            ).fetchall()
        return [(int(pid), str(query)) for pid, query in rows]

    def crash(self, *, lose_data: bool) -> None:
        """Kill the server and its processes at once (what a crash looks like
        to clients); ``lose_data``: its data folder goes too (a new, empty
        cluster starts on :meth:`recover`)."""
        if self.process is not None and self.process.poll() is None:
            children = _children(self.process.pid)
            self.process.kill()
            self.process.wait(10)
            for pid in children:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if lose_data:
            shutil.rmtree(self.data)

    def recover(self) -> None:
        """Start again on the same port (a new cluster if the data was lost)."""
        deadline = time.monotonic() + 30
        while True:  # the killed server's processes may hold its shared memory a moment longer
            try:
                self.start()
                return
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)

    def stop(self, *, remove: bool = True) -> None:
        """A fast shutdown (SIGINT), then a kill if it takes too long."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        if remove:
            shutil.rmtree(self.folder, ignore_errors=True)
            for name in self.databases:  # the stamps files the session stores made in the temporary folder
                Path(stamps_file(self.url(name))).unlink(missing_ok=True)


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


_shared: PostgresCluster | None = None


def shared_postgres() -> PostgresCluster:
    """The test session's cluster, started on first use and stopped at exit."""
    global _shared
    if _shared is None or _shared.process is None or _shared.process.poll() is not None:
        cluster = PostgresCluster()
        try:
            cluster.start()
        except BaseException:
            cluster.stop()
            raise
        _shared = cluster
        atexit.register(cluster.stop)
    return _shared


_contract_database: str | None = None


def contract_database() -> str:
    """The URL of the PostgreSQL database the SQL cases share (one per test
    session, on the session's cluster); each case starts with its tables emptied."""
    global _contract_database
    cluster = shared_postgres()
    if _contract_database is None or not _contract_database.startswith(cluster.url("")):
        _contract_database = cluster.create_database("contract")
    return _contract_database


def empty_sql_tables(database: SqlDatabase) -> None:
    """Our tables, made if missing and emptied (a case sees no earlier case's rows)."""
    database.prepare()
    with database.engine.begin() as connection:
        for table in metadata.sorted_tables:
            connection.execute(table.delete())
