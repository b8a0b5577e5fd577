"""The app's SQL database as flask-mcp uses it: an SQLAlchemy engine (the
app's own, or one made from a URL), its tables made on first use under a
lock so that concurrent first requests of many workers do not race, every
driver error turned into :class:`BackendUnavailable`, and the pool
renewed after ``fork`` (a child must not share its parent's sockets)."""

from __future__ import annotations

import math
import os
import random
import threading
import time
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy import Connection, Engine, create_engine, make_url, text
from sqlalchemy.engine import URL
from sqlalchemy.exc import DBAPIError, OperationalError, ProgrammingError, SQLAlchemyError

from ..contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable
from .tables import metadata

_T = TypeVar("_T")

#: The advisory lock PostgreSQL creators of the tables queue on (any
#: constant both sides agree on: a CRC of the name).
_CREATE_LOCK = zlib.crc32(b"flask-mcp:create-tables")
#: MySQL's and MariaDB's named lock for the same (a server-wide name).
_CREATE_LOCK_NAME = "flask-mcp:create-tables"
#: How many times a creator without a lock looks for what is missing.
_CREATE_LOOKS = 5
#: MySQL's and MariaDB's ER_LOCK_DEADLOCK (InnoDB rolled the transaction back).
_MYSQL_DEADLOCK = 1213


def engine_url(uri: str) -> URL:
    """The SQLAlchemy URL of an ``MCP_BACKEND`` string: ``postgresql://`` and
    ``postgres://`` mean psycopg 3 (SQLAlchemy's own default is psycopg2),
    ``mysql://`` and ``mariadb://`` PyMySQL (its default is mysqlclient, a C
    extension; the ``mysql`` extra installs PyMySQL)."""
    url = make_url(uri)
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    elif url.drivername in ("mysql", "mariadb"):
        url = url.set(drivername=f"{url.drivername}+pymysql")
    return url


def _rolled_back(exc: DBAPIError) -> bool:
    """Whether the database rolled the whole transaction back to break a
    deadlock (or a serialization failure): nothing of it took effect."""
    original = exc.orig
    if getattr(original, "sqlstate", None) in ("40001", "40P01"):  # psycopg
        return True
    arguments: tuple[object, ...] = getattr(original, "args", ())
    return isinstance(exc, OperationalError) and bool(arguments) and arguments[0] == _MYSQL_DEADLOCK


class _NotReached(Exception):
    """No connection could be made (:meth:`SqlDatabase._connect`)."""

    def __init__(self, error: SQLAlchemyError) -> None:
        super().__init__(str(error))
        self.error = error


class SqlDatabase:
    """One SQLAlchemy engine and flask-mcp's tables in it. ``owned``: the
    engine was made here (from a URL) and :meth:`close` disposes of it; an
    engine the app handed in is the app's to close."""

    #: Runs of a transaction chosen as a deadlock's victim, the first included.
    DEADLOCK_ATTEMPTS = 5

    def __init__(self, engine: Engine, *, owned: bool, io_timeout: float = DEFAULT_IO_TIMEOUT) -> None:
        self.engine = engine
        self.owned = owned
        self.io_timeout = io_timeout
        self.dialect = engine.dialect.name
        #: Whether ``autocommit=True`` is honoured (see :meth:`run`).
        self._autocommit = self.dialect not in ("mysql", "mariadb")
        self._ready = False
        self._ready_lock = threading.Lock()
        self._pid = os.getpid()

    @classmethod
    def from_url(cls, uri: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> SqlDatabase:
        """An engine of our own on ``uri``; it connects to nothing yet."""
        url = engine_url(uri)
        options: dict[str, Any] = {"pool_timeout": io_timeout}
        if url.get_backend_name() == "postgresql":
            # libpq's connect_timeout is whole seconds, at least 2; every
            # statement is bounded too, so a stuck server fails the request.
            timeout_ms = max(1, int(io_timeout * 1000))
            options["connect_args"] = {
                "connect_timeout": max(2, math.ceil(io_timeout)),
                "options": f"-c statement_timeout={timeout_ms} -c lock_timeout={timeout_ms}",
            }
        elif url.get_backend_name() in ("mysql", "mariadb"):
            # PyMySQL bounds connecting, and each read and write of the socket;
            # a row lock is waited for whole seconds (InnoDB's default is 50).
            # READ COMMITTED: InnoDB takes no gap locks (REPEATABLE READ's
            # ``DELETE`` of a missing row then ``INSERT`` deadlocks two writers).
            seconds = max(1, math.ceil(io_timeout))
            options["isolation_level"] = "READ COMMITTED"
            # Every use ends its own transaction (run()), and PyMySQL sends the
            # pool's rollback-on-return even with none open: a round trip per
            # call for nothing, and when the server died in between, a
            # traceback in the log ("Exception during reset").
            options["pool_reset_on_return"] = None
            options["connect_args"] = {
                "connect_timeout": seconds, "read_timeout": io_timeout, "write_timeout": io_timeout,
                "init_command": f"SET SESSION innodb_lock_wait_timeout = {seconds}",
            }
        try:
            engine = create_engine(url, **options)
        except (SQLAlchemyError, ImportError) as exc:
            raise ValueError(f"MCP_BACKEND {url.render_as_string(hide_password=True)!r} cannot be used: {exc}") from exc
        return cls(engine, owned=True, io_timeout=io_timeout)

    @property
    def postgresql(self) -> bool:
        return self.dialect == "postgresql"

    def describe(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)

    def run(self, operation: Callable[[Connection], _T], *, autocommit: bool = False) -> _T:
        """``operation(connection)`` in one transaction on a pooled connection,
        committed when it returns; a driver fault becomes :class:`BackendUnavailable`.
        ``autocommit``: each statement commits on its own (no ``BEGIN`` and
        ``COMMIT`` round trips: a read of one row is one round trip), where
        the driver switches without a round trip (not MySQL's: there a
        switch and its reset would cost two, and the switch's own failure
        would escape SQLAlchemy's error handling). A
        transaction the database chose as a deadlock's victim was rolled back
        whole, so it runs again (a few times, after a random pause)."""
        self._after_fork()
        try:
            if not self._ready:
                self.prepare()
            for attempt in range(1, self.DEADLOCK_ATTEMPTS + 1):
                try:
                    with self._connect() as connection:
                        if autocommit and self._autocommit:
                            return operation(connection.execution_options(isolation_level="AUTOCOMMIT"))
                        with connection.begin():
                            return operation(connection)
                except DBAPIError as exc:
                    if attempt == self.DEADLOCK_ATTEMPTS or not _rolled_back(exc):
                        raise
                    time.sleep(random.uniform(0, 0.005 * attempt))  # the other writers go first
            raise AssertionError("unreachable")
        except _NotReached as exc:  # retried() does not try again at once: see _connect
            raise self._fault(exc.error) from exc
        except SQLAlchemyError as exc:
            if not (isinstance(exc, DBAPIError) and exc.connection_invalidated):
                # Perhaps our tables are gone (a database restored or made
                # anew): the next call looks again, and makes what is missing.
                self._ready = False
            raise self._fault(exc) from exc

    def _connect(self) -> Connection:
        """A pooled connection; :class:`_NotReached` if a new one could not be
        made (the server is down or refuses us: trying again at once would
        only fail again, each time costing the driver a connection attempt)."""
        try:
            return self.engine.connect()
        except SQLAlchemyError as exc:
            raise _NotReached(exc) from exc

    def retried(self, operation: Callable[[Connection], _T], *, autocommit: bool = False) -> _T:
        """:meth:`run`, once more after a lost connection (a server restart
        leaves the pool's sockets dead; SQLAlchemy drops them on the first
        error), and once more after a missing table (made again on the retry).
        For operations that may run twice: reads and idempotent writes."""
        for _attempt in range(2):
            try:
                return self.run(operation, autocommit=autocommit)
            except BackendUnavailable as exc:
                cause = exc.__cause__
                lost = isinstance(cause, DBAPIError) and cause.connection_invalidated
                if not (lost or isinstance(cause, ProgrammingError | OperationalError) and not self._ready):
                    raise
        return self.run(operation, autocommit=autocommit)

    def prepare(self) -> None:
        """Create the tables that are missing. The creators queue on a lock
        (two workers' first requests would otherwise both see a table missing
        and one fail creating it): PostgreSQL's advisory lock, MySQL's named
        lock (its DDL commits at once, so the lock is the session's, held at
        most a second: PyMySQL's reads time out soon after). Where a creator
        still lost the race (no lock, or not got in time) it looks again, a
        few times: the other may be creating the next table."""
        with self._ready_lock:
            if self._ready:
                return
            with self._connect() as connection:
                for look in range(1, _CREATE_LOOKS + 1):
                    try:
                        with connection.begin():
                            self._create_tables(connection)
                        break
                    except SQLAlchemyError:
                        if self.postgresql or look == _CREATE_LOOKS or connection.invalidated:
                            raise
                        time.sleep(0.05 * look)
            self._ready = True

    def _create_tables(self, connection: Connection) -> None:
        if self.postgresql:
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _CREATE_LOCK})
            metadata.create_all(connection, checkfirst=True)
            return
        if self.dialect not in ("mysql", "mariadb"):
            metadata.create_all(connection, checkfirst=True)
            return
        wait = max(0, math.ceil(self.io_timeout) - 1)
        connection.execute(text("SELECT GET_LOCK(:name, :wait)"), {"name": _CREATE_LOCK_NAME, "wait": wait})
        try:
            metadata.create_all(connection, checkfirst=True)
        finally:
            connection.execute(text("SELECT RELEASE_LOCK(:name)"), {"name": _CREATE_LOCK_NAME})

    def listening_connection(self) -> Any:
        """A psycopg 3 connection of its own, in autocommit, for LISTEN: one
        of the pool's, detached from it (so it was made with every connect
        argument and hook the app's engine has, and the pool makes another
        in its place)."""
        self._after_fork()
        pooled = self.engine.raw_connection()
        connection: Any = pooled.driver_connection
        pooled.detach()
        if connection is None or not hasattr(connection, "notifies"):
            pooled.close()
            raise TypeError(
                f"the engine's driver ({self.engine.dialect.driver}) has no LISTEN support flask-mcp can use: "
                "use psycopg 3 ('postgresql+psycopg://...')"
            )
        connection.autocommit = True
        return connection

    def check(self) -> None:
        """Raise :class:`BackendUnavailable` unless the database answers (and has our tables)."""
        self.run(lambda connection: connection.execute(text("SELECT 1")).scalar())

    def close(self) -> None:
        """Dispose of the pool if the engine is ours."""
        if self.owned:
            self.engine.dispose()

    def _after_fork(self) -> None:
        """A forked child (gunicorn --preload) opens connections of its own;
        the parent's stay the parent's (``close=False``: not closed from here)."""
        if self._pid != os.getpid():
            self._pid = os.getpid()
            self.engine.dispose(close=False)

    def _fault(self, exc: SQLAlchemyError) -> BackendUnavailable:
        original = getattr(exc, "orig", None) or exc
        return BackendUnavailable(f"SQL database {self.describe()} is unavailable: {type(original).__name__}: "
                                  f"{str(original).strip().splitlines()[0] if str(original).strip() else ''}")


def database_for(where: str | Engine | SqlDatabase, io_timeout: float) -> SqlDatabase:
    """The database handed in, or one on the engine or URL given."""
    if isinstance(where, SqlDatabase):
        return where
    if isinstance(where, Engine):
        return SqlDatabase(where, owned=False, io_timeout=io_timeout)
    return SqlDatabase.from_url(where, io_timeout=io_timeout)
