"""What the core needs from the features it serves, and what it hands them.

The core never calls user code directly: it asks a :class:`ToolProvider` for
definitions and an entry to invoke, passing a :class:`RequestInfo`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .errors import InvalidParams
from .headers import HeaderParam
from .jsonrpc import RequestId
from .meta import LOG_LEVELS, RequestMeta
from .session import Session
from .versions import Revision

#: What a legacy session logs before any ``logging/setLevel``: nothing (the spec
#: leaves it to the server; silence keeps ordinary calls plain JSON and cheap).
DEFAULT_LEGACY_LOG_LEVEL: str | None = None


class RequestCancelled(BaseException):
    """Raised at a tool's next context call once its request is cancelled (a
    ``BaseException`` so that a tool's ``except Exception`` does not swallow it)."""


def log_level_reaches(level: str, threshold: str | None) -> bool:
    return threshold is not None and LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold)


@dataclass(slots=True)
class RequestInfo:
    """Everything known about the request being served, in either era."""

    revision: Revision
    method: str
    params: dict[str, Any]
    headers: Mapping[str, str]
    request_id: RequestId | None = None
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    session: Session | None = None
    meta: RequestMeta | None = None
    #: The authenticated caller, when the app authenticates requests.
    principal: str | None = None
    #: Everything the HTTP layer learned about that caller (a ``Principal``:
    #: scopes, expiry, claims); ``None`` when the app does not authenticate.
    auth: Any = None
    #: Delivers a message that belongs to this request (progress, logs, and on
    #: legacy sessions requests to the client) ahead of its result.
    emit: Callable[[dict[str, Any]], None] = field(default=lambda message: None)
    #: Whether ``emit`` reaches the client live (an open event stream).
    streaming: bool = False
    #: Lets the response's connection go while the request goes on (a
    #: resumable 2025-11-25 stream: the client reconnects and gets the rest).
    end_connection: Callable[[int | None], bool] = field(default=lambda retry_ms: False)
    #: True once the request is cancelled (2026: the client closed the stream;
    #: legacy: ``notifications/cancelled``).
    is_cancelled: Callable[[], bool] = field(default=lambda: False)
    #: Carries answers and cancellations between workers (``None``: no bus).
    bus: Any = None
    #: 2026-07-28 multi round-trip: the client's answers so far, by key.
    input_responses: dict[str, Any] = field(default_factory=dict)
    #: Where :attr:`endpoint_url` comes from: the URL, a function building it
    #: (called at most once), or ``None``.
    endpoint: str | Callable[[], str] | None = None
    #: The task this call runs as (a :class:`~.task_methods.TaskHandle`), when it runs as one.
    task: Any = None
    #: What an observer asks to keep across the rounds of a multi round-trip
    #: call and in the record of a task the call starts (its trace context):
    #: sealed into ``requestState`` as it is, never read by the core. A
    #: function is called once, when first needed (see :meth:`carried_now`).
    carried: dict[str, str] | Callable[[], dict[str, str]] | None = None

    def carried_now(self) -> dict[str, str] | None:
        """:attr:`carried`, made when it was left as a function (most calls never need it)."""
        carried = self.carried
        if callable(carried):
            carried = self.carried = carried()
        return carried

    @property
    def endpoint_url(self) -> str | None:
        """The endpoint's URL as the client used it (scheme, host, path; no
        query), from the HTTP layer; ``None`` when unknown."""
        if callable(self.endpoint):
            self.endpoint = self.endpoint()
        return self.endpoint

    @property
    def protocol_version(self) -> str:
        return self.revision.version

    @property
    def log_threshold(self) -> str | None:
        """The lowest level the client wants logs at; ``None`` = no logs.

        2026-07-28: only with the request's ``_meta`` logLevel. Legacy: the
        session's ``logging/setLevel`` (none before it).
        """
        if self.revision.stateless:
            return self.meta.log_level if self.meta else None
        if self.session is not None and self.session.log_level:
            return self.session.log_level
        return DEFAULT_LEGACY_LOG_LEVEL

    @property
    def progress_token(self) -> str | int | None:
        if self.meta is not None:  # 2026-07-28: the request's _meta, parsed and checked already
            return self.meta.progress_token
        meta = self.params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        return token if isinstance(token, (str, int)) and not isinstance(token, bool) else None


@dataclass(slots=True)
class ToolOutcome:
    """A tool's answer before it is shaped for a revision."""

    content: list[dict[str, Any]]
    structured: Any = None
    has_structured: bool = False
    is_error: bool = False
    meta: dict[str, Any] | None = None


class InvalidToolArguments(Exception):
    """The arguments do not fit the tool's input schema (message is for the model)."""

    def __init__(self, message: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details or []

    def outcome(self, revision: Revision) -> ToolOutcome:
        """The call's answer: an error result the model can read and correct
        (2025-11-25 on), else ``-32602`` (raised as :class:`InvalidParams`)."""
        if not revision.argument_errors_as_results:
            raise InvalidParams(self.message, data={"errors": self.details}) from None
        return ToolOutcome([{"type": "text", "text": self.message}], is_error=True)


class ToolEntry(Protocol):
    name: str
    header_params: tuple[HeaderParam, ...]
    #: ``"optional"`` or ``"required"`` when calls may (must) run as tasks; ``None``: never.
    task_support: str | None
    #: When its task begins: ``"call"`` (as it is called) or ``"explicit"`` (``ctx.start_task()``).
    task_start: str

    def invoke(self, arguments: dict[str, Any], request: RequestInfo) -> ToolOutcome:
        """Validate, call, convert. Raises :class:`InvalidToolArguments` or an MCPError.
        When ``request.task`` is set and ``task_start`` is ``"call"``, starts that task
        (``request.task.start()``) once the call is allowed and its arguments valid."""

    def visible_to(self, request: RequestInfo) -> bool:
        """Whether ``tools/list`` shows this tool to the caller (asked only when ``request.auth`` is set)."""


class ToolProvider(Protocol):
    @property
    def generation(self) -> int:
        """Changes whenever the set of tools changes (for cached listings)."""

    def definitions(self) -> Sequence[dict[str, Any]]:
        """Every tool in the newest revision's shape, in a deterministic order."""

    def find(self, name: str) -> ToolEntry | None: ...
