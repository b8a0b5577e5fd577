"""An ``initialize``'s new session, stored around the building of its answer."""

from __future__ import annotations

from collections.abc import Callable

from .session import Session, SessionStore
from .transport import Reply


def answer_and_store(sessions: SessionStore, session: Session, answer: Callable[[], Reply]) -> Reply:
    """``answer()``, with ``session`` stored and named in ``Mcp-Session-Id``
    unless the answer is an error. A store with ``begin_create`` (Redis) takes
    the write while the answer is built, instead of the worker sleeping on its
    socket afterwards; the id goes out only once the write is confirmed."""
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
        finally:
            finish_create()
        if "error" in reply.body:
            sessions.delete(session.id)  # nobody learnt its id
            return reply
        if session.data or session.log_level is not None:
            sessions.save(session)  # the app's instructions wrote to the new session
    reply.headers["Mcp-Session-Id"] = session.id
    return reply
