"""Requests that may stream: which ones, and how one runs once the HTTP layer
has somewhere to relay its messages (and a way to tell it was cancelled)."""

from __future__ import annotations

import logging
from collections.abc import Callable

from .bus import MessageBus
from .cancellation import Cancellations, Watch
from .input_requests import ASKING_CAPABILITIES
from .request_info import DEFAULT_LEGACY_LOG_LEVEL, RequestCancelled, RequestInfo
from .session import StoreUnavailable
from .transport import Emit, EndConnection, Reply, discard, store_unavailable

logger = logging.getLogger("flask_mcp")

#: Methods that run application code, which may produce messages before its result.
STREAMABLE_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


def may_stream(request: RequestInfo) -> bool:
    """Whether serving this request can send anything before its result:
    progress or logs it asked for, or (legacy) requests to the client."""
    if request.method not in STREAMABLE_METHODS:
        return False
    meta = request.meta
    if meta is not None:  # 2026-07-28: what the request's _meta asks for, checked already
        return meta.progress_token is not None or meta.log_level is not None
    # Legacy: request.log_threshold and request.progress_token, each asked
    # only when the session or the request's _meta leaves the answer open.
    session = request.session
    if session is not None and not request.revision.stateless:
        if session.log_level or DEFAULT_LEGACY_LOG_LEVEL is not None:
            return True
    elif request.log_threshold is not None:
        return True
    if isinstance(request.params.get("_meta"), dict) and request.progress_token is not None:
        return True
    return not request.revision.stateless and not ASKING_CAPABILITIES.isdisjoint(request.client_capabilities)


def run_deferred(
    answer: Callable[[], Reply],
    request: RequestInfo,
    bus: MessageBus | None,
    emit: Emit | None,
    stream_closed: Callable[[], bool],
    end_connection: EndConnection | None = None,
    cancellations: Cancellations | None = None,
) -> Reply | None:
    """Run ``answer`` with ``request`` wired to the stream; ``None`` when the
    request was cancelled (then nothing more is sent for it)."""
    request.emit = emit or discard
    request.streaming = emit is not None
    if end_connection is not None:
        request.end_connection = end_connection
    request.bus = bus
    # A dropped stream cancels a 2026-07-28 request; a legacy client cancels
    # with notifications/cancelled (which may reach another worker).
    if request.revision.stateless:
        request.is_cancelled = stream_closed
        return run_cancellable(answer, request)
    return run_cancellable(answer, request, cancellations)


def run_cancellable(
    answer: Callable[[], Reply], request: RequestInfo, cancellations: Cancellations | None = None
) -> Reply | None:
    """Run ``answer``; ``None`` when the request was cancelled meanwhile. With
    ``cancellations`` (a legacy session's call), ``notifications/cancelled``
    from any worker sets ``request.is_cancelled``; otherwise it is left as set."""
    watch: Watch | None = None
    if cancellations is not None and request.session is not None and request.request_id is not None:
        try:
            watch = cancellations.watch(request.session.id, request.request_id)
        except StoreUnavailable:
            logger.warning("No cancellation for this call: the message bus is unavailable")
        else:
            request.is_cancelled = watch.is_cancelled
    try:
        reply = answer()
    except RequestCancelled:
        return None
    except StoreUnavailable as exc:
        return store_unavailable(exc, request.request_id)
    finally:
        if watch is not None:
            watch.close()
    return None if request.is_cancelled() else reply
