"""Legacy sessions as rows of the app's database (``flask_mcp_sessions``),
and on PostgreSQL each process's copies of the records it read, kept honest
by the notifications every write sends (``notify_bus.py``)."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, bindparam, delete, func, insert, select, text, update

from ..contracts import DEFAULT_IO_TIMEOUT, Session, StoreCount
from ..session_records import dump_record, load_record
from ..sqlite.change_stamps import ChangeStamps
from .database import SqlDatabase, database_for
from .notify_bus import INVALIDATE_SESSION, PG_CHANNEL, PostgresMessageBus
from .tables import sessions as table

_ID, _RECORD, _LAST_SEEN = table.c.id, table.c.record, table.c.last_seen

# Built once: constructing a statement costs more than executing a cached one.
_READ = select(_RECORD, _LAST_SEEN).where(_ID == bindparam("sid"), _LAST_SEEN >= bindparam("cutoff_"))
_REFRESH_STALE = update(table).where(_ID == bindparam("sid"), _LAST_SEEN < bindparam("stamp")).values(
    last_seen=bindparam("stamp"))
_REFRESH_LIVE = update(table).where(_ID == bindparam("sid"), _LAST_SEEN >= bindparam("cutoff_")).values(
    last_seen=bindparam("stamp"))
_SAVE = update(table).where(_ID == bindparam("sid"), _LAST_SEEN >= bindparam("cutoff_")).values(
    record=bindparam("text"))
_DELETE = delete(table).where(_ID == bindparam("sid"))
_FORGET = delete(table).where(_ID == bindparam("sid"), _LAST_SEEN < bindparam("cutoff_"))
# PostgreSQL only (the store has a bus only there).
_UPSERT = text(
    "INSERT INTO flask_mcp_sessions (id, record, last_seen) VALUES (:sid, :text, :stamp) "
    "ON CONFLICT (id) DO UPDATE SET record = EXCLUDED.record, last_seen = EXCLUDED.last_seen "
    "RETURNING xmax <> 0"
)
_SAVE_AND_NOTIFY = text(
    "WITH saved AS (UPDATE flask_mcp_sessions SET record = :text WHERE id = :sid AND last_seen >= :cutoff_"
    f" RETURNING id) SELECT pg_notify('{PG_CHANNEL}', '!' || id) FROM saved"
)


def stamps_file(url: str) -> str:
    """Where the workers of this machine keep the change stamps of the
    sessions in the database at ``url`` (SQLAlchemy's form, password hidden)."""
    name = f"flask-mcp-{hashlib.sha256(url.encode()).hexdigest()[:20]}-{os.getuid()}.stamps"
    return os.path.join(tempfile.gettempdir(), name)


class SqlSessionStore:
    """Sessions as JSON rows; ``last_seen`` is the idle timer, written back
    by a read only when it is more than ``refresh_slack`` seconds old (a read
    is far cheaper than a write). An expired session, once reported gone, is
    deleted, so it stays gone whatever the clock says later. Single
    statements run in autocommit (one round trip each).

    With a PostgreSQL ``bus``, each process keeps the records it read and
    answers a session's next requests from that copy, without a round trip,
    while its listening connection is up (the one the bus holds anyway):
    every write here notifies every listener, which drops its copy. A copy
    is trusted for ``cache_max_age`` seconds at most, which bounds how long a
    change made without a notification (a hand-written ``UPDATE``) goes unseen."""

    #: Seconds a copy is trusted (0: no copies).
    cache_max_age = 1.0
    #: Copies kept per process (the oldest is dropped past this).
    cache_size = 4096
    #: A record longer than this is not kept (it is read each time).
    cache_record_max = 64 * 1024

    def __init__(
        self,
        database: str | Engine | SqlDatabase,
        *,
        timeout: float = 3600.0,
        clock: Callable[[], float] = time.time,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        prune_interval: float = 60.0,
        bus: PostgresMessageBus | None = None,
        stamps_path: str | None = None,
    ) -> None:
        self.database = database_for(database, io_timeout)
        self.timeout = timeout
        self.clock = clock
        self.prune_interval = prune_interval
        #: How stale ``last_seen`` may get before a read refreshes it.
        self.refresh_slack = min(60.0, timeout / 10)
        self._last_prune: float | None = None
        self._bus = bus
        #: The change stamps file of this machine's workers (``None``: one in
        #: the temporary folder, named after the database).
        self.stamps_path = stamps_path
        #: session id -> (listener epoch, read at, last_seen, record, change stamp)
        self._copies: dict[str, tuple[int, float, float, str, int]] = {}
        self._stamps: ChangeStamps | None = None
        self._stamps_opened = False
        #: Bumped by every invalidation: a read that saw it change keeps no copy.
        self._generation = 0
        self._copies_lock = threading.Lock()
        if bus is not None:
            bus.on_invalidation(self._invalidated)

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        record = dump_record(session.to_dict())
        prune = self._last_prune is None or now - self._last_prune >= self.prune_interval
        if prune:
            self._last_prune = now

        def create(connection: Connection) -> bool:
            # A replaced id (never one of ours: they are random) is written over.
            replaced = connection.execute(_DELETE, {"sid": session.id}).rowcount
            connection.execute(insert(table).values(id=session.id, record=record, last_seen=now))
            if prune:
                connection.execute(delete(table).where(_LAST_SEEN < now - self.timeout))
            if replaced and self._bus is not None:
                connection.execute(INVALIDATE_SESSION, {"id": session.id})  # sent at the commit
            return bool(replaced)

        def upsert(connection: Connection) -> bool:
            # PostgreSQL: one statement, one round trip (``initialize`` waits for it);
            # xmax is set on a row the statement updated rather than inserted.
            replaced = connection.execute(_UPSERT, {"sid": session.id, "text": record, "stamp": now}).scalar()
            if prune:
                connection.execute(delete(table).where(_LAST_SEEN < now - self.timeout))
            return bool(replaced)

        if self.database.retried(upsert if self._bus is not None else create, autocommit=self._bus is not None):
            self._drop(session.id)
            if self._stamps is not None:
                self._stamps.bump(session.id)  # after the commit

    def get(self, session_id: str) -> Session | None:
        if "\x00" in session_id:  # no id of ours; PostgreSQL text cannot hold it (an error, not "unknown")
            return None
        now = self.clock()
        epoch = self._bus.live_epoch() if self._bus is not None and self.cache_max_age > 0 else None
        stamps = self._stamps if self._stamps_opened else self._open_stamps()
        if stamps is None:
            epoch = None
        stamp = stamps.read(session_id) if stamps is not None else 0  # before the read, see change_stamps.py
        if epoch is not None:
            copy = self._copies.get(session_id)
            if (
                copy is not None and copy[0] == epoch and copy[4] == stamp
                and 0.0 <= now - copy[1] <= self.cache_max_age and now - copy[2] <= self.refresh_slack
            ):
                session = Session.from_dict(load_record(copy[3]))
                session.last_seen = now
                return session
        generation = self._generation

        def get(connection: Connection) -> tuple[str, float] | None:
            row = connection.execute(_READ, {"sid": session_id, "cutoff_": now - self.timeout}).first()
            if row is None:
                self._forget_expired(connection, session_id, now)
                return None
            last_seen = float(row[1])
            if now - last_seen > self.refresh_slack:
                connection.execute(_REFRESH_STALE, {"sid": session_id, "stamp": now})
                last_seen = now
            return str(row[0]), last_seen

        found = self.database.retried(get, autocommit=True)
        if found is None:
            self._drop(session_id)
            return None
        record, last_seen = found
        if epoch is not None and len(record) <= self.cache_record_max:
            self._keep(session_id, (epoch, now, last_seen, record, stamp), generation)
        session = Session.from_dict(load_record(record))
        session.last_seen = now
        return session

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        if "\x00" in session_id:
            return False
        now = self.clock()

        def touch(connection: Connection) -> bool:
            values = {"sid": session_id, "cutoff_": now - self.timeout, "stamp": now}
            refreshed = connection.execute(_REFRESH_LIVE, values)
            if refreshed.rowcount > 0:
                return True
            self._forget_expired(connection, session_id, now)
            return False

        return self.database.retried(touch, autocommit=True)

    def save(self, session: Session) -> None:
        """Replace the record, keeping the idle timer; an expired or deleted session stays gone."""
        values = {"sid": session.id, "cutoff_": self.clock() - self.timeout, "text": dump_record(session.to_dict())}

        def save(connection: Connection) -> None:
            if self._bus is not None:  # PostgreSQL: the write and its notification, one round trip
                if connection.execute(_SAVE_AND_NOTIFY, values).first() is not None:
                    self._changed(connection, session.id, notified=True)
            elif connection.execute(_SAVE, values).rowcount:
                self._changed(connection, session.id)

        self.database.retried(save, autocommit=True)

    def delete(self, session_id: str) -> bool:
        if "\x00" in session_id:
            return False

        def delete_(connection: Connection) -> bool:
            deleted = connection.execute(_DELETE, {"sid": session_id}).rowcount > 0
            if deleted:
                self._changed(connection, session_id)
            return deleted

        return self.database.retried(delete_, autocommit=True)

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
        """Delete every expired row; how many were deleted. (An expired
        session is never answered from a copy, so no notification is needed.)"""
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
        if connection.execute(_FORGET, {"sid": session_id, "cutoff_": now - self.timeout}).rowcount:
            self._changed(connection, session_id)

    # ------------------------------------------------------------------ copies

    def _changed(self, connection: Connection, session_id: str, *, notified: bool = False) -> None:
        """After a write of ``session_id``'s row: drop this process's copy, and
        (on PostgreSQL) tell every other listener to drop theirs (unless the
        write's own statement did)."""
        self._drop(session_id)
        if self._bus is not None:
            if not notified:
                connection.execute(INVALIDATE_SESSION, {"id": session_id})
            if self._stamps is not None:
                # Autocommit: the change is committed. The other workers of this
                # machine see the stamp before this request is answered; those of
                # other hosts drop their copies when the notification arrives.
                self._stamps.bump(session_id)

    def _open_stamps(self) -> ChangeStamps | None:
        """The change stamps the workers of this machine share for this
        database (a file in the temporary folder named after the database):
        a notification reaches another worker's listener a moment after the
        write, and the client's next request may be quicker."""
        if self._bus is not None:
            path = self.stamps_path or stamps_file(self.database.engine.url.render_as_string(hide_password=True))
            self._stamps = ChangeStamps.open(path)
        self._stamps_opened = True
        return self._stamps

    def _invalidated(self, session_id: str) -> None:
        """Another worker (or this one) changed ``session_id`` (the listener's thread)."""
        with self._copies_lock:
            self._generation += 1
            self._copies.pop(session_id, None)

    def _drop(self, session_id: str) -> None:
        if session_id in self._copies:
            with self._copies_lock:
                self._copies.pop(session_id, None)

    def _keep(self, session_id: str, copy: tuple[int, float, float, str, int], generation: int) -> None:
        """Keep a copy, unless an invalidation arrived while it was read (it may predate the change)."""
        with self._copies_lock:
            if self._generation != generation:
                return
            copies = self._copies
            copies.pop(session_id, None)
            while len(copies) >= self.cache_size:
                copies.pop(next(iter(copies)))
            copies[session_id] = copy
