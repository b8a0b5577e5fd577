"""Sessions, messages, stream events and tasks in one SQLite file: shared by
every gunicorn worker of a machine, with no service to run (the default
backend). One module per table family; the file and its pool are
``database.py``."""

from .bus import SqliteMessageBus
from .database import SCHEMA, SqliteDatabase
from .events import SqliteEventLog
from .sessions import SqliteSessionStore
from .tasks import SqliteTaskStore

__all__ = ["SCHEMA", "SqliteDatabase", "SqliteEventLog", "SqliteMessageBus", "SqliteSessionStore", "SqliteTaskStore"]
