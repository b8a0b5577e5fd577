"""One SQLite file and each process's pool of connections to it. WAL mode
lets readers and the single writer proceed together. A pool rather than a
connection per call: opening one costs a millisecond (the last connection to
close checkpoints the WAL); each has a bounded busy timeout, and after
``fork`` a child opens its own."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ...protocol import process_id
from ..contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable

_T = TypeVar("_T")

SCHEMA = """
CREATE TABLE IF NOT EXISTS mcp_sessions (
    id TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    last_seen REAL NOT NULL
);
-- Expired sessions are found in rowid order (see SqliteSessionStore._prune):
-- the index on last_seen that earlier versions made cost each create a page.
DROP INDEX IF EXISTS mcp_sessions_last_seen;
CREATE TABLE IF NOT EXISTS mcp_messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    payload TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS mcp_messages_channel ON mcp_messages (channel, id);
CREATE INDEX IF NOT EXISTS mcp_messages_created ON mcp_messages (created);
CREATE TABLE IF NOT EXISTS mcp_stream_events (
    stream TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (stream, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS mcp_stream_events_created ON mcp_stream_events (created);
CREATE TABLE IF NOT EXISTS mcp_tasks (
    id TEXT PRIMARY KEY,
    record TEXT NOT NULL,
    expires REAL
);
CREATE INDEX IF NOT EXISTS mcp_tasks_expires ON mcp_tasks (expires);
"""


class SqliteDatabase:
    """One SQLite file: creates its folder and tables on first use (and again
    after a failure, so a fixed permission or a freed lock recovers), and
    turns every SQLite/OS fault into :class:`BackendUnavailable`."""

    #: Idle connections kept per process (more are closed when given back).
    MAX_IDLE = 16
    #: Each connection's page cache, in KiB. SQLite keeps what a connection
    #: read until it closes: at its default (2000 KiB) a pool of pooled
    #: connections on a file grown large (many sessions) held 65 MB per
    #: process for 32 of them. The OS caches the file as well, and the session
    #: store keeps the records it reads, so a small cache costs little.
    CACHE_KIB = 1024

    def __init__(self, path: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> None:
        self.path = os.path.abspath(path)
        self.io_timeout = io_timeout
        self._ready = False
        self._ready_lock = threading.Lock()
        self._idle: list[tuple[sqlite3.Connection, int]] = []
        #: Connections of a past epoch, closed once a new connection opens.
        self._retired: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        self._pool_pid = process_id.current
        self._epoch = 0

    @property
    def prepared(self) -> bool:
        """Whether the file (and its folder and tables) has been made."""
        return self._ready

    def open(self) -> sqlite3.Connection:
        """A new autocommit connection; the caller closes it."""
        try:
            if not self._ready:
                self._prepare()
            return self._connect()
        except (sqlite3.Error, OSError) as exc:
            raise BackendUnavailable(f"SQLite file {self.path} is unavailable: {exc}") from exc

    @contextmanager
    def connection(self) -> Iterator[sqlite3.Connection]:
        """A connection from this process's pool of idle ones (opened when
        none is idle, given back afterwards). Faults become
        :class:`BackendUnavailable` and drop it, so the next call starts
        afresh (a fixed file recovers)."""
        connection, epoch = self._checkout()
        try:
            yield connection
        except sqlite3.Error as exc:
            raise self._fault(connection, exc) from exc
        except BaseException:
            self._checkin(connection, epoch)
            raise
        self._checkin(connection, epoch)

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """``operation(connection)`` as ``with connection()`` would run it, minus
        the generator and context-manager objects ``@contextmanager`` makes
        per call (the session store's operations run here)."""
        connection, epoch = self._checkout()
        try:
            result = operation(connection)
        except sqlite3.Error as exc:
            raise self._fault(connection, exc) from exc
        except BaseException:
            self._checkin(connection, epoch)
            raise
        self._checkin(connection, epoch)
        return result

    def _fault(self, connection: sqlite3.Connection, exc: sqlite3.Error) -> BackendUnavailable:
        """Every connection of this process reconnects once the file works
        again (SQLite shares a file's state between them); until then they are
        set aside, not closed: closing the last one checkpoints, and on an
        unwritable WAL index that can kill the process with SIGBUS."""
        self._epoch += 1
        self._retire(connection)
        return BackendUnavailable(f"SQLite file {self.path} is unavailable: {exc}")

    def _checkout(self) -> tuple[sqlite3.Connection, int]:
        """An idle connection of the current epoch, or a new one. A pool rather
        than one per thread: under gevent every greenlet is a "thread", and
        each would open (and leave behind) a connection of its own."""
        with self._idle_lock:
            if self._pool_pid != process_id.current:  # forked: the parent's connections are not ours to use
                self._idle, self._retired, self._pool_pid = [], [], process_id.current
            while self._idle:
                connection, epoch = self._idle.pop()
                if epoch == self._epoch:
                    return connection, epoch
                self._retired.append(connection)
        epoch = self._epoch
        connection = self.open()
        self._close_retired()  # a new connection works: the file is fine again
        return connection, epoch

    def _checkin(self, connection: sqlite3.Connection, epoch: int) -> None:
        with self._idle_lock:
            if epoch != self._epoch:
                self._retired.append(connection)
                return
            if self._pool_pid == process_id.current and len(self._idle) < self.MAX_IDLE:
                self._idle.append((connection, epoch))
                return
        connection.close()

    def _retire(self, connection: sqlite3.Connection) -> None:
        with self._idle_lock:
            self._retired.append(connection)

    def _close_retired(self) -> None:
        with self._idle_lock:
            retired, self._retired = self._retired, []
        for connection in retired:
            connection.close()

    def close(self) -> None:
        """Close the idle connections (those in use close when given back)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
            self._epoch += 1
        if self._pool_pid == process_id.current:
            for connection, _ in idle:
                connection.close()

    def check(self) -> None:
        """Raise :class:`BackendUnavailable` unless the file can be opened and written."""
        with self.connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")

    def _connect(self) -> sqlite3.Connection:
        # SQLite falls back to a read-only mapping of an unwritable -shm file
        # (the WAL index), and touching that mapping can kill the process with
        # SIGBUS: refuse before SQLite sees such files.
        for path in (self.path, f"{self.path}-wal", f"{self.path}-shm"):
            if os.path.exists(path) and not os.access(path, os.R_OK | os.W_OK):
                raise sqlite3.OperationalError(f"{path} is not readable and writable")
        connection = sqlite3.connect(self.path, timeout=self.io_timeout, isolation_level=None, check_same_thread=False)
        try:
            # NORMAL is durable against a process crash in WAL mode (only a
            # power loss can drop the last transactions).
            connection.execute("PRAGMA synchronous=NORMAL")
            connection.execute(f"PRAGMA cache_size=-{int(self.CACHE_KIB)}")
            # SQLite quietly opens an unwritable file read-only; such a connection,
            # kept for the thread's life, would fail writes after the file is fixed.
            try:
                connection.execute("BEGIN IMMEDIATE")
                connection.execute("ROLLBACK")
            except sqlite3.OperationalError as exc:
                # Busy: another connection holds the write lock past the busy timeout,
                # so the file is being written. This connection's reads go on (WAL);
                # its writes meet the timeout as any would. Refusing it failed reads
                # too: a burst of new streams on a busy machine answered 503.
                if exc.sqlite_errorcode & 0xFF != sqlite3.SQLITE_BUSY:  # the primary code (Python 3.11+)
                    raise
        except BaseException:
            connection.close()
            raise
        return connection

    def _prepare(self) -> None:
        with self._ready_lock:
            if self._ready:
                return
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            connection = self._connect()
            try:
                mode = connection.execute("PRAGMA journal_mode=WAL").fetchone()
                if mode is None or str(mode[0]).lower() != "wal":
                    raise sqlite3.OperationalError(f"cannot switch to WAL mode (got {mode!r})")
                connection.executescript(SCHEMA)
            finally:
                connection.close()
            self._ready = True


def database_for(where: str | SqliteDatabase, io_timeout: float) -> SqliteDatabase:
    """The database handed in, or one opened on the path given."""
    return where if isinstance(where, SqliteDatabase) else SqliteDatabase(where, io_timeout=io_timeout)
