"""What passes between the HTTP layer and the core for one request: what the
HTTP layer hands over besides the body (:class:`Incoming`) and what it must send
back (:class:`Reply`)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import jsonrpc
from .errors import InternalError, MCPError, MethodNotFound
from .events import Resume
from .jsonrpc import RequestId
from .meta import RequestMeta
from .request_info import RequestInfo
from .session import Session, StoreUnavailable
from .subscriptions import Listen
from .versions import Revision

logger = logging.getLogger("flask_mcp")

#: Delivers one message to the client ahead of a request's result.
Emit = Callable[[dict[str, Any]], None]


def discard(message: dict[str, Any]) -> None:
    """Where messages go when nothing can reach the client before the result."""


#: The endpoint's URL, or a function that builds it when first needed (most
#: requests never need it, and building it is not free).
EndpointURL = str | Callable[[], str] | None


class Incoming:
    """What the HTTP layer hands over besides the body, for one request. The
    two headers every request is routed by are read once, here. (A plain
    class: one ``__init__`` call per request instead of a dataclass's two.)"""

    __slots__ = ("headers", "emit", "principal", "auth", "endpoint_url", "header_version", "session_id",
                 "confirm_later", "body_size")

    def __init__(
        self,
        headers: Mapping[str, str],
        emit: Emit,
        principal: str | None,
        auth: Any = None,
        endpoint_url: EndpointURL = None,
        confirm_later: bool = False,
    ) -> None:
        self.headers = headers
        self.emit = emit
        self.principal = principal
        self.auth = auth
        self.endpoint_url = endpoint_url
        #: The HTTP layer reads a new session's write back itself (Reply.unconfirmed).
        self.confirm_later = confirm_later
        #: The POST body's length (no message in it is larger); ``None``: unknown.
        self.body_size: int | None = None
        version = headers.get("mcp-protocol-version")
        self.header_version: str | None = None if version is None else version.strip()
        #: ``Mcp-Session-Id``, once :meth:`read_session_id` read it: a
        #: 2026-07-28 request has no session, and is spared the look-up.
        self.session_id: str | None = None

    def read_session_id(self) -> str | None:
        """Read ``Mcp-Session-Id`` (stripped; ``None`` when absent or blank) into :attr:`session_id`."""
        session_id = self.headers.get("mcp-session-id")
        self.session_id = (session_id.strip() or None) if session_id is not None else None
        return self.session_id

    def request_info(
        self,
        message: jsonrpc.Request,
        revision: Revision,
        client_info: dict[str, Any] | None,
        client_capabilities: dict[str, Any],
        session: Session | None = None,
        meta: RequestMeta | None = None,
    ) -> RequestInfo:
        """What the methods get to know about ``message``, in either era (built
        positionally: keyword arguments cost a string match each, on every request)."""
        return RequestInfo(
            revision, message.method, message.params, self.headers, message.id, client_info,
            client_capabilities, session, meta, self.principal, self.auth, self.emit,
            endpoint=self.endpoint_url,
        )


#: Lets a resumable stream's connection go now (the client reconnects after the
#: given milliseconds, or the stream's default); ``False`` when it cannot.
EndConnection = Callable[[int | None], bool]

#: Runs a deferred request: ``run(emit, stream_closed, end_connection)``;
#: ``emit`` is ``None`` when nothing can reach the client before the result,
#: ``end_connection`` is ``None`` unless the stream is resumable. ``None`` =
#: send nothing more (the request was cancelled).
Deferred = Callable[["Emit | None", Callable[[], bool], "EndConnection | None"], "Reply | None"]


@dataclass(frozen=True, slots=True)
class DurableCall:
    """What the HTTP layer needs to serve a durable call (``Reply.durable``, see
    :mod:`.durable`): the call's id, and its stream, open and the call queued, to follow."""

    request_id: Any
    stream: Resume


@dataclass(slots=True)
class Reply:
    """What to send back: a status, extra headers, and a JSON payload or nothing.

    ``deferred`` is set instead of ``body`` for a request that may stream: the
    HTTP layer runs it where messages can be relayed while it works."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    deferred: Deferred | None = None
    #: Set for ``subscriptions/listen``: the HTTP layer holds the stream open.
    listen: Listen | None = None
    #: Set with ``deferred`` on a 2025-11-25 session: its stream may be kept in
    #: the event log under this session id, to be resumed.
    resumable_session: str | None = None
    #: Set for a durable call (a legacy session's call run on a task queue): its
    #: stream is open in the event log and the call queued; the HTTP layer follows it.
    durable: DurableCall | None = None
    #: Set for a ``GET`` with ``Last-Event-ID``: the stream to replay and follow.
    resume: Resume | None = None
    #: Set on an ``initialize`` answer whose new session the store was sent but
    #: has not confirmed (only when the HTTP layer asked, ``confirm_later``):
    #: call it before sending anything. ``None`` back: the write held; else the
    #: reply to send instead (a 503 without the session id).
    unconfirmed: Callable[[], Reply | None] | None = None


def error_reply(request_id: RequestId | None, error: MCPError, status: int) -> Reply:
    """An error answer with the error's own HTTP status, else ``status``."""
    return Reply(error.http_status or status, jsonrpc.error_message(request_id, error))


def failure_reply(error: MCPError | None, request_id: RequestId, revision: Revision) -> Reply:
    """A method's failure as the client gets it: the error's own HTTP status
    and headers, else the revision's status for an unknown method, else 200;
    ``None``: an unexpected failure (logged by the caller), a 500 without internals."""
    if error is None:
        error = MCPError("Internal error while serving the request; see the server log.")
        return Reply(500, jsonrpc.error_message(request_id, error))
    status = error.http_status
    if status is None:
        status = revision.method_not_found_status if error.code == MethodNotFound.code else 200
    return Reply(status, jsonrpc.error_message(request_id, error), dict(error.http_headers))


def store_unavailable(exc: StoreUnavailable, request_id: RequestId | None = None) -> Reply:
    """503: the session store is down; one log line, no traceback, retry later."""
    logger.error("MCP session store unavailable: %s", exc)
    error = InternalError("Session storage is temporarily unavailable; retry the request shortly.")
    return Reply(503, jsonrpc.error_message(request_id, error), {"Retry-After": "1"})
