"""Where MCP sessions and cross-worker messages live, chosen by ``MCP_BACKEND``:
``memory://``, ``sqlite://`` (the default), ``redis://``, ``redis+cluster://``,
a scheme an installed package registers, or an object the app already has (a
``redis.Redis`` or ``RedisCluster`` client, a cachelib cache, its own store). The contracts a backend implements are in
``contracts.py``; the choice by scheme is ``registry.py``.

May import ``protocol`` only (the contracts are the core's store protocols)."""

from .contracts import (
    Backend,
    BackendOpener,
    BackendOptions,
    BackendUnavailable,
    BusNotSupported,
    EventLog,
    MessageBus,
    SessionStore,
    Subscription,
    TaskStore,
)
from .memory import MemoryMessageBus, MemorySessionStore
from .registry import ENTRY_POINT_GROUP, open_backend

__all__ = [
    "ENTRY_POINT_GROUP",
    "Backend",
    "BackendOpener",
    "BackendOptions",
    "BackendUnavailable",
    "BusNotSupported",
    "EventLog",
    "MemoryMessageBus",
    "MemorySessionStore",
    "MessageBus",
    "SessionStore",
    "Subscription",
    "TaskStore",
    "open_backend",
]
