"""The message bus on Redis PUBLISH/SUBSCRIBE: what one worker publishes
reaches the subscribers of every worker on every host. Subscriptions have a
connection pool of their own (a subscribed connection cannot run commands)."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Sequence
from typing import Any, cast

import redis
from redis.backoff import NoBackoff
from redis.client import PubSub
from redis.retry import Retry

from .contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable, Message, Subscription
from .redis_faults import as_text, closed_bus, describe_client, unavailable

#: Pub/sub channels ignore the database number, so they get their own prefix.
DEFAULT_CHANNEL_PREFIX = "flask-mcp:bus:"


class RedisSubscription(Subscription):
    """A dedicated pub/sub connection; ``get`` waits on its socket, bounded."""

    def __init__(self, bus: RedisMessageBus, channels: Sequence[str]) -> None:
        self._bus = bus
        self._pending: deque[tuple[str, Message]] = deque()
        self._full_read_at = 0.0
        #: Held while the socket is read: ready() may be asked from another thread.
        self._reading = threading.Lock()
        if bus.closed:
            raise closed_bus(bus.where)
        self._pubsub: PubSub | None = PubSub(bus.subscription_pool)
        names = list(dict.fromkeys(bus.channel_prefix + c for c in channels))
        if not names:
            return
        try:
            with unavailable(bus.where):
                self._pubsub.subscribe(*names)
                self._await_confirmations(set(names), deadline=time.monotonic() + bus.io_timeout)
        except BaseException:
            self.close()
            raise

    def get(self, timeout: float) -> tuple[str, Message] | None:
        deadline = time.monotonic() + max(timeout, 0.0)
        while not self._pending and self._pubsub is not None and self._pubsub.subscribed:
            remaining = max(deadline - time.monotonic(), 0.0)
            # Bounded by the deadline: another thread may be waiting on the socket
            # (the cancellation reader), and it hands over what comes.
            if not self._reading.acquire(timeout=remaining):
                break
            try:
                with unavailable(self._bus.where):
                    self._read(max(deadline - time.monotonic(), 0.0))
            finally:
                self._reading.release()
            if remaining <= 0:
                break
        return self._pending.popleft() if self._pending else None

    #: Seconds between full reads even when nothing arrived, so that redis-py's
    #: own health-check PINGs on the subscription still go out.
    READY_FULL_READ = 1.0

    def ready(self) -> bool:
        """Whether :meth:`get` may have something now. Every legacy call asks
        this of the cancellation subscription (``Cancellations.drain``): one
        non-blocking look at the socket instead of redis-py's whole
        ``get_message`` (−11 µs a legacy ``tools/call`` in process, bench/README.md)."""
        pubsub = self._pubsub
        if self._pending or pubsub is None:
            return bool(self._pending)
        if not self._reading.acquire(blocking=False):
            return False  # another thread (the cancellation reader) is reading it, and hands over what comes
        try:
            now = time.monotonic()
            if now - self._full_read_at >= self.READY_FULL_READ:
                self._full_read_at = now
                return True
            connection = pubsub.connection
            return connection is None or bool(connection.can_read(timeout=0))
        except Exception:  # noqa: BLE001 - a broken socket: get() reports it
            return True
        finally:
            self._reading.release()

    def close(self) -> None:
        if self._pubsub is not None:
            pubsub, self._pubsub = self._pubsub, None
            pubsub.close()

    def _await_confirmations(self, names: set[str], deadline: float) -> None:
        """Return once Redis has registered every channel, so nothing
        published after :meth:`RedisMessageBus.subscribe` returns is missed."""
        while names:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BackendUnavailable(f"Redis ({self._bus.where}) did not confirm SUBSCRIBE in time")
            message = self._read(remaining)
            if message is not None and message["type"] == "subscribe":
                names.discard(as_text(message["channel"]))

    def _read(self, timeout: float) -> dict[str, Any] | None:
        """One raw pub/sub message (data messages are queued as they come)."""
        assert self._pubsub is not None
        message = cast(dict[str, Any] | None, self._pubsub.get_message(timeout=timeout))
        if message is not None and message["type"] == "message":
            channel = as_text(message["channel"])[len(self._bus.channel_prefix) :]
            self._pending.append((channel, json.loads(message["data"])))
        return message


class RedisMessageBus:
    """PUBLISH/SUBSCRIBE on prefixed channels (pub/sub ignores the database
    number, so the prefix is what keeps two apps on one server apart)."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        channel_prefix: str = DEFAULT_CHANNEL_PREFIX,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
    ) -> None:
        self.client = client
        self.channel_prefix = channel_prefix
        self.io_timeout = io_timeout
        self.where = describe_client(client)
        # Each subscription holds a connection for its whole life (a listen
        # stream can last hours): they get a pool of their own, unbounded, so
        # that many open streams never starve the client's pool of sessions.
        pool = client.connection_pool
        # No retry: redis-py would reconnect a broken subscription and
        # subscribe again in silence, losing what was published meanwhile (a
        # Sentinel failover kills subscribers); "unavailable" lets the caller
        # know it may have missed messages.
        kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0)}
        self.subscription_pool = redis.ConnectionPool(
            connection_class=pool.connection_class, max_connections=2**31 - 1, **kwargs
        )
        #: Set by :meth:`close` (``Backend.close``).
        self.closed = False

    def close(self) -> None:
        """Close every subscription connection; no new subscription after this."""
        self.closed = True
        self.subscription_pool.disconnect()

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        with unavailable(self.where):
            self.client.publish(self.channel_prefix + channel, payload)

    def subscribe(self, channels: Sequence[str]) -> RedisSubscription:
        return RedisSubscription(self, channels)
