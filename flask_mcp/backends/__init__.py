"""Where MCP sessions and cross-worker messages live, chosen by ``MCP_BACKEND``:
``memory://``, ``sqlite://`` (the default), ``redis://``, or an object the app
already has (a ``redis.Redis`` client, a cachelib cache, a custom store)."""

from .base import (
    Backend,
    BackendUnavailable,
    BusNotSupported,
    MessageBus,
    Subscription,
    open_backend,
)
from .memory import MemoryMessageBus, MemorySessionStore

__all__ = [
    "Backend",
    "BackendUnavailable",
    "BusNotSupported",
    "MemoryMessageBus",
    "MemorySessionStore",
    "MessageBus",
    "Subscription",
    "open_backend",
]
