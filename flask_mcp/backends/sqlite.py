"""Sessions and messages in one SQLite file: shared by every gunicorn worker
of a machine with no service to run. WAL mode lets readers and the single
writer proceed together. Each process keeps a pool of idle connections
(opening one per call costs a millisecond: the last connection to close
checkpoints the WAL), each with a bounded busy timeout; after ``fork`` a child
opens its own. One thread per process polls the message table for all of its
subscriptions."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from ..protocol import jsonrpc
from ..protocol.errors import MCPError
from ..protocol.events import Event
from ..protocol.session import Session
from ..protocol.tasks import TaskRecord
from .base import DEFAULT_IO_TIMEOUT, BackendUnavailable, Message
from .memory import MemorySubscription
from .stamps import ChangeStamps

_T = TypeVar("_T")

logger = logging.getLogger("flask_mcp")

#: This process's id, kept current by an at-fork hook: ``os.getpid()`` is a
#: system call (glibc does not cache it), and the pool asked twice per operation.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)

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
    MAX_IDLE = 32

    def __init__(self, path: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> None:
        self.path = os.path.abspath(path)
        self.io_timeout = io_timeout
        self._ready = False
        self._ready_lock = threading.Lock()
        self._idle: list[tuple[sqlite3.Connection, int]] = []
        #: Connections of a past epoch, closed once a new connection opens.
        self._retired: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        self._pool_pid = _pid
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
            if self._pool_pid != _pid:  # forked: the parent's connections are not ours to use
                self._idle, self._retired, self._pool_pid = [], [], _pid
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
            if self._pool_pid == _pid and len(self._idle) < self.MAX_IDLE:
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
        if self._pool_pid == _pid:
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
            # SQLite quietly opens an unwritable file read-only; such a connection,
            # kept for the thread's life, would fail writes after the file is fixed.
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
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


def _database(where: str | SqliteDatabase, io_timeout: float) -> SqliteDatabase:
    return where if isinstance(where, SqliteDatabase) else SqliteDatabase(where, io_timeout=io_timeout)


def _dump_record(record: dict[str, Any]) -> str:
    """A session record as JSON. A record without app data (every new
    session) holds only what came in as JSON, so orjson (through
    ``jsonrpc.encode``; ten times quicker than the stdlib) writes it exactly.
    App data may hold NaN or infinities, which orjson would store as null:
    the stdlib writes those records, as it writes strings UTF-8 cannot carry
    (lone surrogates)."""
    if record.get("data"):
        return json.dumps(record)
    try:
        return jsonrpc.encode(record).decode()
    except UnicodeEncodeError:
        return json.dumps(record)


def _load_record(text: str) -> Any:
    """A stored session record: orjson when installed (through
    ``jsonrpc.decode_exact``), the stdlib for what that path refuses (NaN
    and infinities in app data)."""
    try:
        return jsonrpc.decode_exact(text.encode())
    except MCPError:
        return json.loads(text)


#: Refresh a session's idle timer and move its row to the end of the table
#: (a new, highest rowid), which keeps rowid order in idle order for ``_prune``.
_REFRESH = "UPDATE mcp_sessions SET rowid = (SELECT MAX(rowid) FROM mcp_sessions) + 1, last_seen = ? WHERE id = ?"
_REFRESH_STALE = _REFRESH + " AND last_seen < ?"
_REFRESH_LIVE = _REFRESH + " AND last_seen >= ?"


class SqliteSessionStore:
    """Sessions as JSON rows; the ``last_seen`` column is the idle timer, and
    rowid order is idle order (a refresh moves the row to the end), which is
    how expired rows are found without an index. Each operation runs on a
    pooled connection (``SqliteDatabase.run``), once more on a fresh one after
    a fault.

    Each process keeps the records it read, and answers a session's next
    requests from that copy while the session's change stamp (``stamps.py``,
    shared by every process using the file) is unchanged: every write here
    stamps the session after committing. A copy is trusted for at most
    ``cache_max_age`` seconds, which bounds how long a change made by
    something that does not stamp (an older flask-mcp during a rolling
    restart, a hand-written UPDATE) can go unseen."""

    #: Seconds a cached record is trusted without reading the database (0: no cache).
    cache_max_age = 1.0
    #: Records kept per process (the oldest is dropped past this).
    cache_size = 4096

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        timeout: float = 3600.0,
        clock: Callable[[], float] = time.time,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        prune_interval: float = 60.0,
    ) -> None:
        self.database = _database(database, io_timeout)
        self.timeout = timeout
        self.clock = clock
        self.prune_interval = prune_interval
        #: How stale ``last_seen`` may get before a read refreshes it.
        self.refresh_slack = min(60.0, timeout / 10)
        #: Rows a prune reads per batch, oldest first.
        self.prune_batch = 500
        self._last_prune: float | None = None
        #: session id -> (stamp read before the record, read at, last_seen, record)
        self._cached: dict[str, tuple[int, float, float, str]] = {}
        self._stamps: ChangeStamps | None = None
        self._stamps_opened = False

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        values = (session.id, _dump_record(session.to_dict()), now)

        def create(connection: sqlite3.Connection) -> None:
            connection.execute("INSERT OR REPLACE INTO mcp_sessions (id, record, last_seen) VALUES (?, ?, ?)", values)
            self._changed(session.id)
            self._maybe_prune(connection, now)

        self._retried(create)

    def get(self, session_id: str) -> Session | None:
        """Read the session; the idle timer is written back only when it is more
        than ``refresh_slack`` seconds old (a read is far cheaper than a write).
        A cached record unchanged since it was read needs no read at all."""
        now = self.clock()
        stamps = self._stamps if self._stamps_opened else self._open_stamps()
        stamp = stamps.read(session_id) if stamps is not None else 0  # before the read, see stamps.py
        cached = self._cached.get(session_id)
        if (
            cached is not None and stamps is not None and cached[0] == stamp
            and 0.0 <= now - cached[1] <= self.cache_max_age and now - cached[2] <= self.refresh_slack
        ):
            record = cached[3]
        else:

            def get(connection: sqlite3.Connection) -> tuple[str, float] | None:
                row = connection.execute(
                    "SELECT record, last_seen FROM mcp_sessions WHERE id = ? AND last_seen >= ?",
                    (session_id, now - self.timeout),
                ).fetchone()
                if row is None:
                    self._forget_expired(connection, session_id, now)
                    return None
                last_seen: float = row[1]
                if now - last_seen > self.refresh_slack:
                    connection.execute(_REFRESH_STALE, (now, session_id, now))
                    last_seen = now
                return row[0], last_seen

            found = self._retried(get)
            if found is None:
                self._cached.pop(session_id, None)
                return None
            record, last_seen = found
            if stamps is not None and self.cache_max_age > 0:
                self._cache(session_id, (stamp, now, last_seen, record))
        session = Session.from_dict(_load_record(record))
        session.last_seen = now
        return session

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        now = self.clock()

        def touch(connection: sqlite3.Connection) -> bool:
            cursor = connection.execute(_REFRESH_LIVE, (now, session_id, now - self.timeout))
            if cursor.rowcount > 0:
                return True
            self._forget_expired(connection, session_id, now)
            return False

        return self._retried(touch)

    def save(self, session: Session) -> None:
        """Replace the record in one statement; an expired or deleted session stays gone."""
        values = (_dump_record(session.to_dict()), session.id, self.clock() - self.timeout)

        def save(connection: sqlite3.Connection) -> None:
            connection.execute("UPDATE mcp_sessions SET record = ? WHERE id = ? AND last_seen >= ?", values)
            self._changed(session.id)

        self._retried(save)

    def delete(self, session_id: str) -> bool:
        def delete(connection: sqlite3.Connection) -> bool:
            deleted = connection.execute("DELETE FROM mcp_sessions WHERE id = ?", (session_id,)).rowcount > 0
            self._changed(session_id)
            return deleted

        return self._retried(delete)

    def _retried(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run a store operation, once more on a fresh connection if it failed:
        a connection kept from before a fault (a file made read-only, then fixed)
        can stay broken when a new one works."""
        try:
            return self.database.run(operation)
        except BackendUnavailable:
            return self.database.run(operation)

    def __len__(self) -> int:
        """Live sessions (for tests and diagnostics)."""
        with self.database.connection() as connection:
            row = connection.execute(
                "SELECT COUNT(*) FROM mcp_sessions WHERE last_seen >= ?", (self.clock() - self.timeout,)
            ).fetchone()
        return int(row[0])

    def _forget_expired(self, connection: sqlite3.Connection, session_id: str, now: float) -> None:
        """An expired session, once reported gone, stays gone (whatever the clock says later)."""
        connection.execute("DELETE FROM mcp_sessions WHERE id = ? AND last_seen < ?", (session_id, now - self.timeout))
        self._changed(session_id)

    def _changed(self, session_id: str) -> None:
        """After a committed write: stamp the session, so every process's
        cached copy of it is read again, and drop this process's own."""
        self._cached.pop(session_id, None)
        stamps = self._stamps if self._stamps_opened else self._open_stamps()
        if stamps is not None:
            stamps.bump(session_id)

    def _cache(self, session_id: str, entry: tuple[int, float, float, str]) -> None:
        cached = self._cached
        if len(cached) >= self.cache_size and session_id not in cached:
            del cached[next(iter(cached))]  # the oldest entry
        cached[session_id] = entry

    def _open_stamps(self) -> ChangeStamps | None:
        """The stamps file beside the database, once it exists (its folder is made with it)."""
        if self.database.prepared:
            self._stamps = ChangeStamps.open(self.database.path + "-stamps")
            self._stamps_opened = True
        return self._stamps

    def _maybe_prune(self, connection: sqlite3.Connection, now: float) -> None:
        """Delete expired rows, at most once per ``prune_interval`` per process."""
        if self._last_prune is not None and now - self._last_prune < self.prune_interval:
            return
        self._last_prune = now
        self._prune(connection, now - self.timeout)

    def _prune(self, connection: sqlite3.Connection, cutoff: float) -> None:
        """Every write of ``last_seen`` gives the row a new, highest rowid, so
        rowid order is idle order and the expired rows come first: read them
        oldest first, a batch at a time, and delete the expired ones, until a
        batch holds a live row. No index on ``last_seen`` is needed (it cost
        every create a third B-tree page), and the reads hold up no writer.
        Rows can be out of order (written by an earlier version, or before the
        clock stepped back): a live one then stops a prune, but each prune
        still deletes the expired rows of its first batch."""
        after = -(2**63)
        while True:
            rows = connection.execute(
                "SELECT rowid, last_seen FROM mcp_sessions WHERE rowid > ? ORDER BY rowid LIMIT ?",
                (after, self.prune_batch),
            ).fetchall()
            expired = [(rowid, cutoff) for rowid, last_seen in rows if last_seen < cutoff]
            if expired:
                connection.execute("BEGIN IMMEDIATE")
                try:
                    connection.executemany("DELETE FROM mcp_sessions WHERE rowid = ? AND last_seen < ?", expired)
                    connection.execute("COMMIT")
                except BaseException:
                    if connection.in_transaction:
                        connection.execute("ROLLBACK")
                    raise
            if len(expired) < self.prune_batch:
                return
            after = rows[-1][0]


class _Poller:
    """One thread per process polls the message table for every subscription
    of a bus and hands each row to the subscriptions of its channel. An idle
    subscription then costs nothing of its own (a listen stream under gevent
    used to poll on a connection of its own: 13 µs every 20 ms each). The
    thread runs only while there are subscriptions; a fault is logged and the
    next poll tries again, so subscriptions recover with the file."""

    def __init__(self, bus: SqliteMessageBus) -> None:
        self._bus = bus
        self._lock = threading.Lock()
        #: Each subscription, with the last row id it must not receive.
        self._subscriptions: dict[MemorySubscription, int] = {}
        self._cursor = 0
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._failing = False

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        subscription = MemorySubscription(self, channels)
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's thread is not here
                self._subscriptions, self._thread, self._pid = {}, None, os.getpid()
            with self._bus.database.connection() as connection:
                latest = int(connection.execute("SELECT COALESCE(MAX(id), 0) FROM mcp_messages").fetchone()[0])
            if not self._subscriptions:
                self._cursor = latest
            self._subscriptions[subscription] = latest
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flask-mcp-sqlite-bus", daemon=True)
                self._thread.start()
        return subscription

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            self._subscriptions.pop(subscription, None)

    def _run(self) -> None:
        while True:
            time.sleep(self._bus.poll_interval)
            with self._lock:
                if not self._subscriptions:
                    self._thread = None
                    return
                try:
                    with self._bus.database.connection() as connection:
                        self._deliver(connection)
                except BackendUnavailable as exc:
                    if not self._failing:
                        logger.warning("SQLite message bus: polling failed, retrying: %s", exc)
                    self._failing = True

    def _deliver(self, connection: sqlite3.Connection) -> None:
        rows = connection.execute(
            "SELECT id, channel, payload FROM mcp_messages WHERE id > ? ORDER BY id LIMIT 1000", (self._cursor,)
        ).fetchall()
        self._failing = False
        for row_id, channel, payload in rows:
            self._cursor = int(row_id)
            for subscription, after in self._subscriptions.items():
                if row_id > after and channel in subscription.channels:
                    subscription.deliver(str(channel), json.loads(payload))


class SqliteMessageBus:
    """A message table every process of the machine can append to and poll.
    Rows older than ``retention`` seconds are pruned by publishers."""

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        poll_interval: float = 0.02,
        retention: float = 60.0,
        prune_interval: float = 5.0,
    ) -> None:
        self.database = _database(database, io_timeout)
        self.poll_interval = poll_interval
        self.retention = retention
        self.prune_interval = prune_interval
        self._last_prune: float | None = None
        self._poller = _Poller(self)

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        now = time.time()
        with self.database.connection() as connection:
            connection.execute(
                "INSERT INTO mcp_messages (channel, payload, created) VALUES (?, ?, ?)", (channel, payload, now)
            )
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                connection.execute("DELETE FROM mcp_messages WHERE created < ?", (now - self.retention,))

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        return self._poller.subscribe(channels)


class SqliteEventLog:
    """Resumable streams' events as rows; a stream is forgotten ``retention``
    seconds after its last event (writers prune, at most every ``prune_interval``)."""

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        retention: float = 600.0,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        prune_interval: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.database = _database(database, io_timeout)
        self.retention = retention
        self.prune_interval = prune_interval
        self.clock = clock
        self._last_prune: float | None = None

    def append(self, stream: str, seq: int, event: Event) -> None:
        now = self.clock()
        with self.database.connection() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO mcp_stream_events (stream, seq, event, created) VALUES (?, ?, ?, ?)",
                (stream, seq, json.dumps(event), now),
            )
            # The whole stream lives as long as its newest event.
            connection.execute("UPDATE mcp_stream_events SET created = ? WHERE stream = ? AND seq = 0", (now, stream))
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                self._prune(connection, now)

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        with self.database.connection() as connection:
            head = connection.execute(
                "SELECT created FROM mcp_stream_events WHERE stream = ? AND seq = 0", (stream,)
            ).fetchone()
            if head is None or self.clock() - head[0] > self.retention:
                return None
            rows = connection.execute(
                "SELECT seq, event FROM mcp_stream_events WHERE stream = ? AND seq > ? ORDER BY seq", (stream, after)
            ).fetchall()
        return [(int(seq), json.loads(event)) for seq, event in rows]

    def _prune(self, connection: sqlite3.Connection, now: float) -> None:
        """Drop every stream whose newest event (its priming row's time) is too old."""
        connection.execute(
            "DELETE FROM mcp_stream_events WHERE stream IN "
            "(SELECT stream FROM mcp_stream_events WHERE seq = 0 AND created < ?)",
            (now - self.retention,),
        )


class SqliteTaskStore:
    """Task records as JSON rows with their expiry; an update is one
    ``BEGIN IMMEDIATE`` transaction, so workers never overwrite each other."""

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        clock: Callable[[], float] = time.time,
        prune_interval: float = 60.0,
    ) -> None:
        self.database = _database(database, io_timeout)
        self.clock = clock
        self.prune_interval = prune_interval
        self._last_prune: float | None = None

    def create(self, record: TaskRecord) -> None:
        now = self.clock()
        with self.database.connection() as connection:
            connection.execute(
                "INSERT INTO mcp_tasks (id, record, expires) VALUES (?, ?, ?)",
                (record.task_id, json.dumps(record.to_dict()), record.expires_at),
            )
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                connection.execute("DELETE FROM mcp_tasks WHERE expires < ?", (now,))

    def get(self, task_id: str) -> TaskRecord | None:
        with self.database.connection() as connection:
            return self._read(connection, task_id)

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        with self.database.connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                record = self._read(connection, task_id)
                if record is not None and change(record):
                    connection.execute(
                        "UPDATE mcp_tasks SET record = ? WHERE id = ?", (json.dumps(record.to_dict()), task_id)
                    )
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        return record

    def _read(self, connection: sqlite3.Connection, task_id: str) -> TaskRecord | None:
        row = connection.execute(
            "SELECT record FROM mcp_tasks WHERE id = ? AND (expires IS NULL OR expires >= ?)",
            (task_id, self.clock()),
        ).fetchone()
        return None if row is None else TaskRecord.from_dict(json.loads(row[0]))
