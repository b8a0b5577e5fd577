"""JSON-RPC batches: an array of messages in one POST, allowed only on a
2025-03-26 session (later revisions removed them). Each message is answered
as if it came alone; the answers go back as one array."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import jsonrpc
from .errors import BadProtocolVersionHeader, InvalidRequest, MCPError, SessionNotFound, SessionRequired
from .jsonrpc import Message
from .session import Session
from .transport import Incoming, Reply, error_reply
from .versions import DEFAULT_LEGACY_VERSION, REVISIONS, check_session_version_header

#: Answers one message of an established session (``None``: nothing to send).
AnswerOne = Callable[[Message, Incoming, Session], "Reply | None"]


def answer_batch(items: list[Any], incoming: Incoming, session: Session | None, answer_one: AnswerOne) -> Reply:
    """The reply to a batch, ``session`` being the live session the request
    names (``None``: none named, or none found). The revision is checked
    first, so a client of a later revision learns that batches are gone
    before it learns anything about its session."""
    if session is not None:
        try:
            check_session_version_header(incoming.header_version, session.protocol_version)
        except BadProtocolVersionHeader as exc:
            return error_reply(None, exc, 400)
        effective = session.protocol_version
    else:
        effective = incoming.header_version or DEFAULT_LEGACY_VERSION
    revision = REVISIONS.get(effective)
    if revision is None or not revision.batching:
        return error_reply(None,
            InvalidRequest(
                f"JSON-RPC batches are not allowed in protocol version {effective}: send one message per POST."
            ),
            400,
        )
    if not items:
        return error_reply(None, InvalidRequest("An empty JSON-RPC batch is invalid."), 400)
    if session is None:
        error = SessionNotFound() if incoming.session_id else SessionRequired()
        return error_reply(None, error, error.http_status or 400)
    answers: list[dict[str, Any]] = []
    for item in items:
        try:
            message = jsonrpc.classify(item)
        except MCPError as exc:
            answers.append(jsonrpc.error_message(jsonrpc.readable_id(item), exc))
            continue
        answered = answer_one(message, incoming, session)
        if answered is not None:
            answers.append(answered.body)
    return Reply(200, answers) if answers else Reply(202)
