"""Sessions, messages, stream events and tasks in one SQLite file: shared by
every gunicorn worker of a machine, with no service to run (the default
backend). One module per table family; the file and its pool are
``database.py``."""

from __future__ import annotations

import os

from ..contracts import Backend, BackendOptions
from .bus import SqliteMessageBus
from .database import SCHEMA, SqliteDatabase
from .events import SqliteEventLog
from .sessions import SqliteSessionStore
from .task_store import SqliteTaskStore

__all__ = [
    "SCHEMA",
    "SqliteDatabase",
    "SqliteEventLog",
    "SqliteMessageBus",
    "SqliteSessionStore",
    "SqliteTaskStore",
    "open_uri",
    "sqlite_path",
]

#: The SQLite file used for a bare ``sqlite://`` (in the app's instance folder).
DEFAULT_SQLITE_FILE = "flask-mcp.sqlite3"


def sqlite_path(rest: str, instance_path: str) -> str:
    """The file a ``sqlite://`` URI names, SQLAlchemy style: ``sqlite://`` is
    the default file, ``sqlite:///name`` is relative to the instance folder,
    ``sqlite:////abs/name`` is absolute."""
    if rest.startswith("/"):
        rest = rest[1:]
    rest = rest.partition("?")[0]
    if not rest:
        return os.path.join(instance_path, DEFAULT_SQLITE_FILE)
    if os.path.isabs(rest):
        return rest
    return os.path.join(instance_path, rest)


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``sqlite://`` and ``sqlite:///path`` (registered as the ``sqlite`` scheme)."""
    path = sqlite_path(uri.partition("://")[2], options.instance_path)
    database = SqliteDatabase(path, io_timeout=options.io_timeout)
    return Backend(
        sessions=SqliteSessionStore(database, timeout=options.timeout),
        bus=SqliteMessageBus(database),
        events=SqliteEventLog(database, retention=options.retention),
        tasks=SqliteTaskStore(database),
        description=f"sqlite:///{path}",
        check=database.check,
        close=database.close,
    )
