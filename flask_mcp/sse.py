"""Server-Sent Events framing."""

from __future__ import annotations

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
