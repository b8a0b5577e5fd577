"""An ``initialize``'s new session: opened from the client's request, then
stored around the building of its answer."""

from __future__ import annotations

import logging
from collections.abc import Callable

from . import jsonrpc
from .errors import InternalError, InvalidParams
from .jsonrpc import Request, RequestId
from .session import Session, SessionStore, StoreUnavailable, new_session_id
from .transport import Incoming, Reply, error_reply, store_unavailable
from .versions import negotiate

logger = logging.getLogger("flask_mcp")


def open_session(message: Request, incoming: Incoming, limit: int, now: float) -> Session | Reply:
    """The session ``initialize`` opens (not stored yet), at the revision
    negotiated from the one the client asked for; or the 400 that refuses it
    (no version, or client info and capabilities past ``limit`` bytes)."""
    params = message.params
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        return error_reply(
            message.id,
            InvalidParams('initialize needs params.protocolVersion (a string such as "2025-11-25").'),
            400,
        )
    capabilities = params.get("capabilities")
    client_info = params.get("clientInfo")
    if incoming.body_size is None or incoming.body_size > limit:  # only a body past it can hold that much
        size = len(jsonrpc.encode([client_info, capabilities]))
        if size > limit:
            return error_reply(message.id, InvalidParams(
                f"initialize's clientInfo and capabilities take {size} bytes as JSON; a session keeps at most "
                f"{limit} (MCP_MAX_CLIENT_INFO_BYTES): send them without large extra fields."), 400)
    return Session(
        id=new_session_id(),
        protocol_version=negotiate(requested),
        client_info=client_info if isinstance(client_info, dict) else {},
        client_capabilities=capabilities if isinstance(capabilities, dict) else {},
        principal=incoming.principal,
        created_at=now,
        last_seen=now,
    )


def answer_and_store(
    sessions: SessionStore,
    session: Session,
    answer: Callable[[], Reply],
    request_id: RequestId,
    confirm_later: bool = False,
) -> Reply:
    """``answer()``, with ``session`` stored and named in ``Mcp-Session-Id``
    unless the answer is an error. A store with ``begin_create`` (Redis) takes
    the write while the answer is built, instead of the worker sleeping on its
    socket afterwards; the id goes out only once the write is confirmed. With
    ``confirm_later`` the HTTP layer confirms it (``Reply.unconfirmed``), as
    late as it can: the worker finishes the response meanwhile."""
    begin_create = getattr(sessions, "begin_create", None)
    if begin_create is None:
        reply = answer()
        if "error" in reply.body:
            return reply
        sessions.create(session)
    else:
        finish_create = begin_create(session)
        try:
            reply = answer()
        except BaseException:
            finish_create()
            raise
        if "error" in reply.body:
            finish_create()
            sessions.delete(session.id)  # nobody learnt its id
            return reply
        if session.data or session.log_level is not None:
            finish_create()
            sessions.save(session)  # the app's instructions wrote to the new session
        elif confirm_later:
            reply.unconfirmed = _confirmation(finish_create, request_id)
        else:
            finish_create()
    reply.headers["Mcp-Session-Id"] = session.id
    return reply


def _confirmation(finish_create: Callable[[], None], request_id: RequestId) -> Callable[[], Reply | None]:
    """``finish_create`` as ``Reply.unconfirmed``: it never raises, so the HTTP
    layer can call it where an exception would reach the WSGI server."""

    def confirm() -> Reply | None:
        try:
            finish_create()
        except StoreUnavailable as exc:
            return store_unavailable(exc, request_id)
        except Exception:
            logger.exception("Storing a new MCP session failed")
            error = InternalError("Internal server error; see the server log.")
            return Reply(500, jsonrpc.error_message(request_id, error))
        return None

    return confirm
