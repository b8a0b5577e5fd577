"""Live answers for requests that may stream: the request runs in a thread of
its own while the response relays what it emits.

The answer is plain JSON when the result comes first; it becomes an event
stream as soon as a message (progress, a log line, a request to the client)
must precede the result. Idle streams get heartbeat comments, which is also how
a client that went away is noticed (the next write fails and the generator is
closed): for a 2026-07-28 request that is a cancellation.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from flask import Response, copy_current_request_context

from . import sse
from .protocol import jsonrpc
from .protocol.bus import EVENTS_CHANNEL, MessageBus
from .protocol.errors import InternalError
from .protocol.exchange import Deferred, Reply
from .protocol.subscriptions import Listen

logger = logging.getLogger("flask_mcp")

EVENT_STREAM = "text/event-stream"
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class _Done:
    """The deferred request finished; ``reply`` is ``None`` when it was cancelled."""

    reply: Reply | None


def respond(deferred: Deferred, *, live: bool, heartbeat: float, render: Callable[[Reply], Response]) -> Response:
    """Run a deferred request and answer it: JSON, or an event stream once a
    message must precede the result. Without ``live`` (a client that takes no
    event stream) it runs here and nothing precedes the result."""
    if not live:
        return render(deferred(None, _never) or _cancelled_reply())
    outbox: queue.SimpleQueue[dict[str, Any] | _Done] = queue.SimpleQueue()
    closed = threading.Event()

    @copy_current_request_context
    def work() -> None:
        try:
            outcome = deferred(outbox.put, closed.is_set)
        except BaseException:  # the thread must always report back
            logger.exception("Unexpected failure while serving a streamed request")
            error = InternalError("Internal error while serving the request; see the server log.")
            outcome = Reply(500, jsonrpc.error_message(None, error))
        outbox.put(_Done(outcome))

    threading.Thread(target=work, name="flask-mcp-request", daemon=True).start()
    first = outbox.get()
    if isinstance(first, _Done):
        return render(first.reply or _cancelled_reply())
    return Response(
        _relay(first, outbox, closed, heartbeat),
        status=200,
        headers=sse.SSE_HEADERS,
        mimetype=EVENT_STREAM,
    )


def _relay(
    first: dict[str, Any],
    outbox: queue.SimpleQueue[dict[str, Any] | _Done],
    closed: threading.Event,
    heartbeat: float,
) -> Iterator[bytes]:
    """The event stream: messages as they come, heartbeats while idle, then the
    result. Closing it early (the client left) tells the request."""
    try:
        yield sse.event(jsonrpc.encode(first))
        while True:
            try:
                item = outbox.get(timeout=heartbeat)
            except queue.Empty:
                yield sse.comment("keep-alive")
                continue
            if isinstance(item, _Done):
                if item.reply is not None and item.reply.body is not None:
                    yield sse.event(jsonrpc.encode(item.reply.body))
                return
            yield sse.event(jsonrpc.encode(item))
    finally:
        closed.set()


def _never() -> bool:
    return False


def _cancelled_reply() -> Reply:
    """A request cancelled before anything was sent: an empty acceptance."""
    return Reply(202)


def listen(subscription: Listen, bus: MessageBus, *, heartbeat: float) -> Response:
    """A ``subscriptions/listen`` stream: the acknowledgement, then the change
    notifications it asked for, published by any worker, until the client leaves."""
    # Subscribe before answering, so nothing published after the ack is missed.
    events = bus.subscribe([EVENTS_CHANNEL])

    def stream() -> Iterator[bytes]:
        try:
            yield sse.event(jsonrpc.encode(subscription.acknowledgement()))
            while True:
                item = events.get(heartbeat)
                if item is None:
                    yield sse.comment("keep-alive")
                    continue
                notification = subscription.notification_for(item[1])
                if notification is not None:
                    yield sse.event(jsonrpc.encode(notification))
        finally:
            events.close()

    return Response(stream(), status=200, headers=sse.SSE_HEADERS, mimetype=EVENT_STREAM)
