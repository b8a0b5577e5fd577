"""Sessions, messages, stream events and tasks in the app's own SQL database,
through SQLAlchemy Core (the engine and pool the app already has, or one made
from a ``postgresql://`` or ``mysql://`` URL). On PostgreSQL the message bus is LISTEN/NOTIFY
(``notify_bus.py``); on other databases it polls a table (``polling_bus.py``).
The tables are ``tables.py``'s :data:`metadata`, for the app's migrations.

Imports ``contracts`` (and the memory backend's subscription queue) only,
like every backend; SQLAlchemy and psycopg are the ``sql`` extra, PyMySQL the ``mysql`` one."""

from __future__ import annotations

from sqlalchemy import Engine

from ..contracts import Backend, BackendOptions
from .database import SqlDatabase, engine_url
from .events import SqlEventLog
from .notify_bus import PostgresMessageBus
from .polling_bus import PollingMessageBus
from .sessions import SqlSessionStore
from .tables import metadata
from .task_store import SqlTaskStore

__all__ = [
    "PollingMessageBus",
    "PostgresMessageBus",
    "SqlDatabase",
    "SqlEventLog",
    "SqlSessionStore",
    "SqlTaskStore",
    "backend_on",
    "engine_url",
    "metadata",
    "open_uri",
]


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``postgresql://...`` (and ``postgresql+psycopg://``, ``postgres://``),
    ``mysql://...`` or ``mariadb://...`` (PyMySQL): an engine of flask-mcp's
    own, connecting to nothing until first used."""
    return backend_on(SqlDatabase.from_url(uri, io_timeout=options.io_timeout), options)


def adopt(engine: Engine, options: BackendOptions) -> Backend:
    """The app's own engine (Flask-SQLAlchemy's ``db.engine``): its pool is
    shared, and closing the backend leaves it open."""
    return backend_on(SqlDatabase(engine, owned=False, io_timeout=options.io_timeout), options)


def backend_on(database: SqlDatabase, options: BackendOptions) -> Backend:
    """Every store on ``database``; the bus its dialect allows."""
    if database.postgresql and database.engine.dialect.driver != "psycopg":
        raise ValueError(
            f"MCP_BACKEND {database.describe()!r}: on PostgreSQL flask-mcp listens through psycopg 3; "
            "use the 'postgresql+psycopg://' driver (pip install flask-mcp[sql])"
        )
    bus: PostgresMessageBus | PollingMessageBus
    if database.postgresql:
        bus = PostgresMessageBus(database)
        description = f"PostgreSQL {database.describe()} (LISTEN/NOTIFY bus)"
    else:
        bus = PollingMessageBus(database)
        description = f"SQL {database.describe()} (polling bus)"

    def close() -> None:
        bus.close()
        database.close()

    return Backend(
        sessions=SqlSessionStore(
            database, timeout=options.timeout, bus=bus if isinstance(bus, PostgresMessageBus) else None
        ),
        bus=bus,
        events=SqlEventLog(database, retention=options.retention),
        tasks=SqlTaskStore(database),
        description=description,
        check=database.check,
        close=close,
    )
