"""The two small interfaces every backend offers (a session store and,
optionally, a message bus), the one fault type the HTTP layer maps to 503,
and :func:`open_backend`, which turns ``MCP_BACKEND`` (a URI or an object)
into a :class:`Backend`."""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit

# The bus interfaces live in the sans-IO core (which uses them); re-exported here.
from ..protocol.bus import Message as Message
from ..protocol.bus import MessageBus as MessageBus
from ..protocol.bus import Subscription as Subscription
from ..protocol.events import EventLog
from ..protocol.session import SessionStore, StoreUnavailable
from ..protocol.task_records import TaskStore

#: How long one backend call may block before it fails (seconds).
DEFAULT_IO_TIMEOUT = 2.0
#: How long a resumable stream's events are kept after its last one (seconds).
DEFAULT_EVENT_RETENTION = 600.0
#: The SQLite file used for a bare ``sqlite://`` (in the app's instance folder).
DEFAULT_SQLITE_FILE = "flask-mcp.sqlite3"

ACCEPTED = (
    "MCP_BACKEND accepts 'memory://', 'sqlite://' (a file in the instance folder), "
    "'sqlite:///relative/path' (relative to the instance folder), 'sqlite:////absolute/path', "
    "'redis://...', 'rediss://...', 'redis+unix:///path/to/redis.sock', "
    "a redis.Redis client, a cachelib cache (e.g. the one Flask-Caching built), "
    "or an object with create/get/save/delete methods"
)


class BackendUnavailable(StoreUnavailable):
    """The backend cannot be reached right now (Redis down, SQLite file locked
    or unwritable). Transient: the HTTP layer answers 503 and the next request
    tries again."""


class BusNotSupported(RuntimeError):
    """A feature needs a message bus and the configured backend has none."""


class NotCountable(RuntimeError):
    """A store that cannot enumerate its records (a cache): it can neither count
    nor prune them. The message says why, for ``flask mcp sessions`` to show."""


@dataclass(frozen=True)
class StoreCount:
    """What a session or task store holds: ``live`` records, and ``expired``
    ones it still keeps until they are pruned (0 where the server drops them
    itself, as Redis does)."""

    live: int
    expired: int = 0


@runtime_checkable
class CountableStore(Protocol):
    """A session or task store an operator can count and prune (``flask mcp
    sessions``). Both may be slow (they look at every record): they are for
    maintenance, never for the request path."""

    def count(self) -> StoreCount:
        """How many records are live and how many expired ones are still kept;
        raises :class:`NotCountable` when the store cannot tell."""

    def prune(self) -> int:
        """Delete every expired record now; how many were deleted."""


def _nothing() -> None:
    """Default for :attr:`Backend.check` and :attr:`Backend.close`."""


@dataclass(frozen=True, eq=False)
class Backend:
    """What ``MCP_BACKEND`` resolved to: where sessions and cross-worker messages live."""

    sessions: SessionStore
    bus: MessageBus | None = None
    #: Where resumable streams keep their events (needs the bus too).
    events: EventLog | None = None
    #: Where tasks live (the tasks extension); ``None``: tasks are not offered.
    tasks: TaskStore | None = None
    description: str = "custom backend"
    #: Raises :class:`BackendUnavailable` when the backend cannot be reached
    #: (for a start-up log line or a health check); never required before use.
    check: Callable[[], None] = field(default=_nothing)
    #: Frees connections this backend opened itself (not ones handed in).
    close: Callable[[], None] = field(default=_nothing)

    @property
    def supports_bus(self) -> bool:
        return self.bus is not None

    def describe(self) -> str:
        """A one-line description for logs (never contains a password)."""
        return self.description

    def require_bus(self, feature: str) -> MessageBus:
        """The bus, or a clear refusal naming the feature and the fix."""
        if self.bus is None:
            raise BusNotSupported(
                f"{feature} needs a message bus, and MCP_BACKEND ({self.describe()}) has none: "
                "use 'memory://', 'sqlite://' or 'redis://...'"
            )
        return self.bus


def open_backend(
    spec: object,
    *,
    timeout: float,
    instance_path: str,
    io_timeout: float = DEFAULT_IO_TIMEOUT,
    retention: float = DEFAULT_EVENT_RETENTION,
) -> Backend:
    """Resolve ``MCP_BACKEND``.

    ``timeout`` is the idle timeout of a session (``MCP_SESSION_TIMEOUT``);
    ``io_timeout`` bounds every single backend call; ``retention`` is how long
    a resumable stream's events are kept after its last one. Nothing is connected
    here, so an app starts while Redis is down and recovers when it is back;
    call :attr:`Backend.check` to probe.
    """
    if isinstance(spec, Backend):
        return spec
    if isinstance(spec, str):
        return _open_uri(spec, timeout=timeout, instance_path=instance_path, io_timeout=io_timeout, retention=retention)
    # The optional drivers are only looked at when already imported: an
    # object of theirs cannot exist otherwise.
    redis_module = sys.modules.get("redis")
    if redis_module is not None and isinstance(spec, redis_module.Redis):
        from .redis import backend_from_client

        return backend_from_client(spec, timeout=timeout, io_timeout=io_timeout, owned=False, retention=retention)
    cachelib_module = sys.modules.get("cachelib")
    if cachelib_module is not None and isinstance(spec, cachelib_module.BaseCache):
        from .cachelib import CachelibSessionStore

        return Backend(
            sessions=CachelibSessionStore(spec, timeout=timeout), description=f"cachelib {type(spec).__name__}"
        )
    if all(callable(getattr(spec, name, None)) for name in ("create", "get", "save", "delete")):
        bus = spec if isinstance(spec, MessageBus) else None
        events = spec if bus is not None and isinstance(spec, EventLog) else None
        return Backend(sessions=spec, bus=bus, events=events, description=f"custom store {type(spec).__name__}")  # type: ignore[arg-type]
    raise ValueError(f"MCP_BACKEND {spec!r} is not supported. {ACCEPTED}.")


def _open_uri(uri: str, *, timeout: float, instance_path: str, io_timeout: float, retention: float) -> Backend:
    scheme, sep, rest = uri.partition("://")
    scheme = scheme.lower()
    if not sep:
        raise ValueError(f"MCP_BACKEND {uri!r} is not a URI. {ACCEPTED}.")
    if scheme == "memory":
        if rest:
            raise ValueError(f"MCP_BACKEND {uri!r}: 'memory://' takes no path. {ACCEPTED}.")
        from .memory import MemoryEventLog, MemoryMessageBus, MemorySessionStore, MemoryTaskStore

        return Backend(
            sessions=MemorySessionStore(timeout=timeout),
            bus=MemoryMessageBus(),
            events=MemoryEventLog(retention=retention),
            tasks=MemoryTaskStore(),
            description="memory://",
        )
    if scheme == "sqlite":
        from .sqlite import SqliteDatabase, SqliteEventLog, SqliteMessageBus, SqliteSessionStore, SqliteTaskStore

        path = sqlite_path(rest, instance_path)
        database = SqliteDatabase(path, io_timeout=io_timeout)
        return Backend(
            sessions=SqliteSessionStore(database, timeout=timeout),
            bus=SqliteMessageBus(database),
            events=SqliteEventLog(database, retention=retention),
            tasks=SqliteTaskStore(database),
            description=f"sqlite:///{path}",
            check=database.check,
            close=database.close,
        )
    if scheme in ("redis", "rediss", "redis+unix"):
        from .redis import backend_from_url

        url = "unix://" + rest if scheme == "redis+unix" else uri
        backend = backend_from_url(url, timeout=timeout, io_timeout=io_timeout, retention=retention)
        return dataclasses.replace(backend, description=redact_url(uri))
    raise ValueError(f"MCP_BACKEND {redact_url(uri)!r} has an unknown scheme {scheme!r}. {ACCEPTED}.")


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


def redact_url(url: str) -> str:
    """``url`` with any password (in the authority or the query) masked."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hostport = netloc.rpartition("@")
        user, has_password, _ = userinfo.partition(":")
        netloc = f"{user}:***@{hostport}" if has_password else netloc
    query = parts.query
    if query:
        pairs = [(k, "***" if k.lower() == "password" else v) for k, v in parse_qsl(query, keep_blank_values=True)]
        query = urlencode(pairs, safe="*/")
    # Not urlunsplit: it would turn ``unix:///path`` into ``unix:/path``.
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
