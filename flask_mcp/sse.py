"""Server-Sent Events framing."""

from __future__ import annotations

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def event(data: bytes, *, name: str = "message", event_id: str | None = None) -> bytes:
    """One SSE event carrying one JSON text (which never contains a newline)."""
    head = f"event: {name}\n".encode()
    if event_id is not None:
        head += f"id: {event_id}\n".encode()
    return head + b"data: " + data + b"\n\n"


def comment(text: str = "") -> bytes:
    """A comment line: keeps an idle stream alive without an event."""
    return f": {text}\n\n".encode()
