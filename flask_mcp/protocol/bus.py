"""The message bus interface: how one worker tells another something (a
client's answer, a cancellation, a list change). Backends implement it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, Self, runtime_checkable

#: Channels the server uses, so every worker agrees on the names.
EVENTS_CHANNEL = "flask-mcp:events"
#: Every legacy session's ``notifications/cancelled`` (see ``cancellation.py``).
CANCELLATIONS_CHANNEL = "flask-mcp:cancellations"


def reply_channel(session_id: str, request_id: str | int) -> str:
    """Where a legacy client's answer to our request ``request_id`` is published.
    An id no request of ours carries may hold a lone surrogate, which no
    backend can store: it is written as its escape (our own ids are ASCII)."""
    channel = f"flask-mcp:reply:{session_id}:{request_id}"
    return channel if channel.isascii() else channel.encode("utf-8", "backslashreplace").decode()




Message = dict[str, Any]


class Subscription(Protocol):
    """Messages on some channels, from the moment of subscribing until closed.
    Implementations inherit this class for the context-manager methods."""

    def get(self, timeout: float) -> tuple[str, Message] | None:
        """The next ``(channel, message)``, waiting at most ``timeout`` seconds;
        ``None`` when nothing arrived in time."""
        ...

    def close(self) -> None:
        """Stop listening and free the connection (idempotent)."""
        ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@runtime_checkable
class MessageBus(Protocol):
    """Publish/subscribe on named channels, so one worker can hear another."""

    def publish(self, channel: str, message: Message) -> None:
        """Send a JSON-serialisable ``message`` to current subscribers of ``channel``."""
        ...

    def subscribe(self, channels: Sequence[str]) -> Subscription:
        """Start listening; messages published after this returns are delivered."""
        ...
