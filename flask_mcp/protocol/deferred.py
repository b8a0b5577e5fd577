"""Requests that may stream: which ones, and how one runs once the HTTP layer
has somewhere to relay its messages (and a way to tell it was cancelled)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .bus import MessageBus, Subscription, cancel_channel
from .request_info import RequestCancelled, RequestInfo
from .session import StoreUnavailable
from .transport import Emit, EndConnection, Reply, discard, store_unavailable

logger = logging.getLogger("flask_mcp")

#: Methods that run application code, which may produce messages before its result.
STREAMABLE_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})
#: Client capabilities that let a legacy request ask the client something mid-call.
_ASKING = frozenset({"elicitation", "sampling", "roots"})


def may_stream(request: RequestInfo) -> bool:
    """Whether serving this request can send anything before its result:
    progress or logs it asked for, or (legacy) requests to the client."""
    if request.method not in STREAMABLE_METHODS:
        return False
    if request.progress_token is not None or request.log_threshold is not None:
        return True
    return not request.revision.stateless and not _ASKING.isdisjoint(request.client_capabilities)


def run_deferred(
    answer: Callable[[], Reply],
    request: RequestInfo,
    bus: MessageBus | None,
    emit: Emit | None,
    stream_closed: Callable[[], bool],
    end_connection: EndConnection | None = None,
) -> Reply | None:
    """Run ``answer`` with ``request`` wired to the stream; ``None`` when the
    request was cancelled (then nothing more is sent for it)."""
    request.emit = emit or discard
    request.streaming = emit is not None
    if end_connection is not None:
        request.end_connection = end_connection
    request.bus = bus
    subscription = None
    if request.session is not None and bus is not None:
        try:
            subscription = bus.subscribe([cancel_channel(request.session.id)])
        except StoreUnavailable:
            logger.warning("No cancellation for this call: the message bus is unavailable")
    # A dropped stream cancels a 2026-07-28 request; a legacy client cancels
    # with notifications/cancelled (which may reach another worker).
    request.is_cancelled = _cancellation(request, subscription, stream_closed)
    try:
        reply = answer()
    except RequestCancelled:
        return None
    except StoreUnavailable as exc:
        return store_unavailable(exc, request.request_id)
    finally:
        if subscription is not None:
            subscription.close()
    return None if request.is_cancelled() else reply


def _cancellation(
    request: RequestInfo, subscription: Subscription | None, stream_closed: Callable[[], bool]
) -> Callable[[], bool]:
    """The request's ``is_cancelled`` check: polls the bus without waiting."""
    cancelled = False

    def is_cancelled() -> bool:
        nonlocal cancelled
        if cancelled:
            return True
        if request.revision.stateless and stream_closed():
            cancelled = True
        while subscription is not None and not cancelled:
            try:
                item = subscription.get(0)
            except StoreUnavailable:
                break
            if item is None:
                break
            cancelled = item[1].get("requestId") == request.request_id
        return cancelled

    return is_cancelled
