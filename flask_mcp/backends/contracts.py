"""The storage contracts every backend implements, in one place: the session
record and its store, the message bus, the event log of resumable streams, the
task store, the one fault type a backend raises for any driver error
(:class:`BackendUnavailable`), and :class:`Backend`, the bundle an opener returns.

The record types and interfaces are defined by the sans-IO core, which uses
them, and re-exported here so that a backend (built in or third-party) imports
this module only. Nothing here imports a backend, so no backend imports
anything that imports it back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable
from urllib.parse import parse_qsl, urlencode, urlsplit

from ..protocol.bus import Message as Message
from ..protocol.bus import MessageBus as MessageBus
from ..protocol.bus import Subscription as Subscription
from ..protocol.events import Event as Event
from ..protocol.events import EventLog as EventLog
from ..protocol.session import Session as Session
from ..protocol.session import SessionStore as SessionStore
from ..protocol.session import StoreUnavailable
from ..protocol.task_records import TaskRecord as TaskRecord
from ..protocol.task_records import TaskStore as TaskStore

#: How long one backend call may block before it fails (seconds).
DEFAULT_IO_TIMEOUT = 2.0
#: How long a resumable stream's events are kept after its last one (seconds).
DEFAULT_EVENT_RETENTION = 600.0


class BackendUnavailable(StoreUnavailable):
    """The backend cannot be reached right now (Redis down, SQLite file locked
    or unwritable). A backend wraps every driver error in this one type, so the
    HTTP layer needs to know no driver: it answers 503 and the next request
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


@runtime_checkable
class StatusCountingStore(Protocol):
    """A task store that can tell its live tasks by status cheaply (optional;
    for the ``flask_mcp.tasks.live`` gauge). Still a look at every record
    (one ``GROUP BY``, one pass over a dict): for a background count, never
    for the request path. Redis does not offer it: see docs/observability.md."""

    def count_by_status(self) -> dict[str, int]:
        """How many tasks within their TTL have each status (``working``,
        ``input_required``, ``completed``...); a status none has may be left out."""


@runtime_checkable
class ListingTaskStore(Protocol):
    """A task store that can list the tasks still running (optional; ``flask mcp
    sessions`` shows them). A look at every record: for an operator, never for
    the request path."""

    def unfinished(self, limit: int) -> list[TaskRecord]:
        """Tasks within their TTL that have not ended (``working``,
        ``input_required``), oldest first, at most ``limit`` of them."""


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
                "use 'memory://', 'sqlite://', 'redis://...' or the app's SQL database ('postgresql://...')"
            )
        return self.bus


@dataclass(frozen=True)
class BackendOptions:
    """What the app's configuration tells every backend it opens."""

    #: The idle timeout of a session (``MCP_SESSION_TIMEOUT``), seconds.
    timeout: float
    #: The app's instance folder, where file-based backends keep relative paths.
    instance_path: str
    #: How long one backend call may block before it fails, seconds.
    io_timeout: float = DEFAULT_IO_TIMEOUT
    #: How long a resumable stream's events are kept after its last one, seconds.
    retention: float = DEFAULT_EVENT_RETENTION


class BackendOpener(Protocol):
    """Turns a URI of the scheme it is registered for into a :class:`Backend`.

    It connects to nothing (an app must start while its Redis is down) and
    raises ``ValueError`` with an actionable message for a URI it cannot use.
    Third-party packages register one per scheme under the entry point group
    ``flask_mcp.backends``.
    """

    def __call__(self, uri: str, options: BackendOptions, /) -> Backend: ...


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
        pairs = [
            (k, "***" if k.lower().endswith("password") else v)  # password, sentinel_password...
            for k, v in parse_qsl(query, keep_blank_values=True)
        ]
        query = urlencode(pairs, safe="*/")
    # Not urlunsplit: it would turn ``unix:///path`` into ``unix:/path``.
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
