"""Server-Sent Events framing, and the guard that ends a failing stream cleanly."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator

from ..protocol import jsonrpc
from ..protocol.errors import InternalError

logger = logging.getLogger("flask_mcp")

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(data: bytes, *, name: str = "message", event_id: str | None = None) -> bytes:
    """One SSE event carrying one JSON text (which never contains a newline)."""
    head = f"event: {name}\n".encode()
    if event_id is not None:
        head += f"id: {event_id}\n".encode()
    return head + b"data: " + data + b"\n\n"


def priming(event_id: str, retry_ms: int) -> bytes:
    """The first event of a resumable stream: an id to resume from, the
    reconnection delay, and empty data (no message)."""
    return f"id: {event_id}\nretry: {retry_ms}\ndata: \n\n".encode()


def retry(retry_ms: int) -> bytes:
    """Sent before the server lets a resumable stream's connection go: how
    long the client waits before it reconnects with ``Last-Event-ID``."""
    return f"retry: {retry_ms}\n\n".encode()


def comment(text: str = "") -> bytes:
    """A comment line: keeps an idle stream alive without an event."""
    return f": {text}\n\n".encode()


def guarded(events: Iterable[bytes], request_id: jsonrpc.RequestId | None = None) -> Iterator[bytes]:
    """``events``, ended by a JSON-RPC error event (with ``request_id`` when the
    stream answers one request) if producing them fails: once the headers are
    out, an exception would otherwise reach the WSGI server, which cuts the
    chunked body or sends its own HTML error page. Closing this generator
    closes ``events`` (``yield from``), so their clean-up runs as before."""
    try:
        yield from events
    except Exception:
        logger.exception("Unexpected failure in an MCP event stream; ending it with an error event")
        error = InternalError("Internal error while streaming the answer; see the server log.")
        yield event(jsonrpc.encode(jsonrpc.error_message(request_id, error)))
