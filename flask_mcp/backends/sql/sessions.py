"""Legacy sessions as rows of the app's database (``flask_mcp_sessions``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, delete, func, insert, select, update

from ..contracts import DEFAULT_IO_TIMEOUT, Session, StoreCount
from ..session_records import dump_record, load_record
from .database import SqlDatabase, database_for
from .tables import sessions as table

_ID, _RECORD, _LAST_SEEN = table.c.id, table.c.record, table.c.last_seen


class SqlSessionStore:
    """Sessions as JSON rows; ``last_seen`` is the idle timer, written back
    by a read only when it is more than ``refresh_slack`` seconds old (a read
    is far cheaper than a write). An expired session, once reported gone, is
    deleted, so it stays gone whatever the clock says later."""

    def __init__(
        self,
        database: str | Engine | SqlDatabase,
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
        self._last_prune: float | None = None

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        record = dump_record(session.to_dict())
        prune = self._last_prune is None or now - self._last_prune >= self.prune_interval
        if prune:
            self._last_prune = now

        def create(connection: Connection) -> None:
            # A replaced id (never one of ours: they are random) is written over.
            connection.execute(delete(table).where(_ID == session.id))
            connection.execute(insert(table).values(id=session.id, record=record, last_seen=now))
            if prune:
                connection.execute(delete(table).where(_LAST_SEEN < now - self.timeout))

        self.database.retried(create)

    def get(self, session_id: str) -> Session | None:
        now = self.clock()

        def get(connection: Connection) -> str | None:
            row = connection.execute(
                select(_RECORD, _LAST_SEEN).where(_ID == session_id, _LAST_SEEN >= now - self.timeout)
            ).first()
            if row is None:
                self._forget_expired(connection, session_id, now)
                return None
            if now - row[1] > self.refresh_slack:
                connection.execute(update(table).where(_ID == session_id, _LAST_SEEN < now).values(last_seen=now))
            return str(row[0])

        record = self.database.retried(get)
        if record is None:
            return None
        session = Session.from_dict(load_record(record))
        session.last_seen = now
        return session

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        now = self.clock()

        def touch(connection: Connection) -> bool:
            refreshed = connection.execute(
                update(table).where(_ID == session_id, _LAST_SEEN >= now - self.timeout).values(last_seen=now)
            )
            if refreshed.rowcount > 0:
                return True
            self._forget_expired(connection, session_id, now)
            return False

        return self.database.retried(touch)

    def save(self, session: Session) -> None:
        """Replace the record, keeping the idle timer; an expired or deleted session stays gone."""
        record = dump_record(session.to_dict())
        cutoff = self.clock() - self.timeout
        self.database.retried(
            lambda connection: connection.execute(
                update(table).where(_ID == session.id, _LAST_SEEN >= cutoff).values(record=record)
            )
        )

    def delete(self, session_id: str) -> bool:
        return self.database.retried(
            lambda connection: connection.execute(delete(table).where(_ID == session_id)).rowcount > 0
        )

    def __len__(self) -> int:
        """Live sessions (for tests and diagnostics)."""
        return self.count().live

    def count(self) -> StoreCount:
        """Live sessions, and expired rows not deleted yet (a scan: for maintenance)."""
        cutoff = self.clock() - self.timeout

        def count(connection: Connection) -> StoreCount:
            total = connection.execute(select(func.count()).select_from(table)).scalar_one()
            expired = connection.execute(select(func.count()).where(_LAST_SEEN < cutoff)).scalar_one()
            return StoreCount(int(total) - int(expired), int(expired))

        return self.database.retried(count)

    def prune(self) -> int:
        """Delete every expired row; how many were deleted."""
        cutoff = self.clock() - self.timeout
        return self.database.retried(
            lambda connection: connection.execute(delete(table).where(_LAST_SEEN < cutoff)).rowcount
        )

    def rate_limit_storage(self) -> object:
        """A ``limits`` storage counting rate limits in this database (the
        rate limiter asks a session store for one; ``limits`` must be installed)."""
        from .rate_limits import SqlRateLimitStorage

        return SqlRateLimitStorage(self.database)

    def _forget_expired(self, connection: Connection, session_id: str, now: float) -> None:
        connection.execute(delete(table).where(_ID == session_id, _LAST_SEEN < now - self.timeout))
