"""Legacy sessions as rows of the SQLite file, with each process's copies
of the records it read (kept honest by the change stamps in ``change_stamps.py``)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from ..contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable, Session, StoreCount
from ..session_records import dump_record as _dump_record
from ..session_records import load_record as _load_record
from .change_stamps import ChangeStamps
from .database import SqliteDatabase, database_for

_T = TypeVar("_T")


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
    requests from that copy while the session's change stamp (``change_stamps.py``,
    shared by every process using the file) is unchanged: every write here
    stamps the session after committing. A copy is trusted for at most
    ``cache_max_age`` seconds, which bounds how long a change made by
    something that does not stamp (an older flask-mcp during a rolling
    restart, a hand-written UPDATE) can go unseen."""

    #: Seconds a cached record is trusted without reading the database (0: no cache).
    cache_max_age = 1.0
    #: Records kept per process (the oldest is dropped past this).
    cache_size = 4096
    #: Characters of record text kept per process: clients choose what their
    #: records hold (client info, capabilities), so a count alone bounds nothing.
    cache_chars = 4 * 1024 * 1024
    #: A record longer than this is not kept at all (it is read each time).
    cache_record_max = 64 * 1024

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        timeout: float = 3600.0,
        clock: Callable[[], float] = time.time,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        prune_interval: float = 60.0,
    ) -> None:
        self.database = database_for(database, io_timeout)
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
        self._cached_chars = 0
        self._cache_lock = threading.Lock()  # for changes only: reads look up the dict without it
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
        stamp = stamps.read(session_id) if stamps is not None else 0  # before the read, see change_stamps.py
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
                self._uncache(session_id)
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

    def count(self) -> StoreCount:
        """Live sessions, and expired rows a prune has not deleted yet (one
        scan of the table: for maintenance, not the request path)."""
        cutoff = self.clock() - self.timeout

        def count(connection: sqlite3.Connection) -> StoreCount:
            total, expired = connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(last_seen < ?), 0) FROM mcp_sessions", (cutoff,)
            ).fetchone()
            return StoreCount(int(total) - int(expired), int(expired))

        return self._retried(count)

    def prune(self) -> int:
        """Delete every expired row, wherever it sits (creates delete only the
        oldest ones); how many were deleted. An expired session is never
        answered from a process's cached copy, so no stamp is needed."""
        cutoff = self.clock() - self.timeout

        def prune(connection: sqlite3.Connection) -> int:
            return connection.execute("DELETE FROM mcp_sessions WHERE last_seen < ?", (cutoff,)).rowcount

        return self._retried(prune)

    def _forget_expired(self, connection: sqlite3.Connection, session_id: str, now: float) -> None:
        """An expired session, once reported gone, stays gone (whatever the clock says later)."""
        cursor = connection.execute(
            "DELETE FROM mcp_sessions WHERE id = ? AND last_seen < ?", (session_id, now - self.timeout)
        )
        if cursor.rowcount > 0:  # unknown ids (a client's stale or made-up one) stamp nothing
            self._changed(session_id)

    def _changed(self, session_id: str) -> None:
        """After a committed write: stamp the session, so every process's
        cached copy of it is read again, and drop this process's own."""
        self._uncache(session_id)
        stamps = self._stamps if self._stamps_opened else self._open_stamps()
        if stamps is not None:
            stamps.bump(session_id)

    def _cache(self, session_id: str, entry: tuple[int, float, float, str]) -> None:
        """Keep a record, dropping the oldest ones past ``cache_size`` records
        or ``cache_chars`` characters."""
        size = len(entry[3])
        if size > self.cache_record_max:
            self._uncache(session_id)
            return
        cached = self._cached
        with self._cache_lock:
            old = cached.pop(session_id, None)
            if old is not None:
                self._cached_chars -= len(old[3])
            while cached and (len(cached) >= self.cache_size or self._cached_chars + size > self.cache_chars):
                self._cached_chars -= len(cached.pop(next(iter(cached)))[3])  # the oldest entry
            cached[session_id] = entry
            self._cached_chars += size

    def _uncache(self, session_id: str) -> None:
        if session_id not in self._cached:
            return
        with self._cache_lock:
            old = self._cached.pop(session_id, None)
            if old is not None:
                self._cached_chars -= len(old[3])

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
