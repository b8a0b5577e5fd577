"""One pub/sub connection per process and Redis server (per node on a
cluster), shared by every subscription of the process: a listen stream, a
resumed stream, the cancellation watch and a question waiting for its answer
each used to hold a connection of their own, so a host with thousands of open
streams held thousands of Redis clients (issue #34).

A dispatcher thread (a greenlet under gevent) does all the connection's I/O:
it sends the ``SUBSCRIBE``/``UNSUBSCRIBE`` subscriptions queue (one socket
is never read and written by two threads: a TLS socket must not be), reads
what Redis sends and hands each message to the queues of its channel's
subscribers. A channel is subscribed while one subscription of the process
wants it, and unsubscribed when the last one closes.

Failure behaves as a connection of its own did: when the connection breaks
(Redis restarted, ``CLIENT KILL``, no answer to a command or a ``PING``
within the I/O timeout) every subscription of the process is told the bus
is unavailable (it may have missed messages), and the next subscription
connects again. A forked child (gunicorn ``--preload``) never uses its
parent's connection."""

from __future__ import annotations

import json
import logging
import selectors
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..protocol import process_id
from ..protocol.process_id import ProcessLock
from .contracts import BackendUnavailable, Message
from .memory import MemorySubscription
from .redis_faults import as_text, as_unavailable, closed_bus

logger = logging.getLogger("flask_mcp")

#: Seconds between two looks of an idle dispatcher at its deadlines.
TICK = 1.0
#: Seconds of silence on the connection before it is pinged: how long a
#: connection that died without a word goes unnoticed (plus the I/O timeout).
PING_INTERVAL = 5.0
#: Seconds a connection no subscription uses is kept before it is closed.
IDLE_CLOSE = 30.0


def connection_maker(pool: redis.ConnectionPool) -> Callable[[], Any]:
    """Makes connections like ``pool``'s, for the shared subscription: RESP2
    (messages arrive as replies, never as pushes), no retry (redis-py would
    reconnect and subscribe again in silence, losing what was published
    meanwhile), no health checks of redis-py's own (a ``PING`` sent behind the
    dispatcher's back would steal its reply)."""
    kwargs = {k: v for k, v in pool.connection_kwargs.items() if "maint_notifications" not in k}
    kwargs.update(protocol=2, health_check_interval=0, retry=Retry(NoBackoff(), 0))
    connection_class = pool.connection_class
    return lambda: connection_class(**kwargs)


class RedisSubscription(MemorySubscription):
    """A queue the shared connection fills; ``get`` waits on it. A fault of
    the connection is reported once the messages received before it are read.
    It is its own hub: closing it leaves every shared connection it joined."""

    def __init__(self, channel_prefix: str, channels: Sequence[str]) -> None:
        super().__init__(self, channels)
        self.names = tuple(dict.fromkeys(channel_prefix + c for c in channels))
        self._prefix_length = len(channel_prefix)
        #: The shared connections this subscription is registered with.
        self._shares: list[SharedPubSub] = []

    def deliver(self, name: str, message: Message) -> None:
        super().deliver(name[self._prefix_length :], message)

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        """On close (as the hub of itself): leave the shared connections."""
        self.leave()

    def join(self, share: SharedPubSub) -> None:
        self._shares.append(share)

    def leave(self) -> None:
        """Unregister from every shared connection (their channels no other
        subscription wants are unsubscribed)."""
        shares, self._shares = self._shares, []
        for share in shares:
            share.remove(self)


class _Reply:
    """A command queued on the shared connection, waiting for its one reply
    (Redis answers a connection's commands in order)."""

    __slots__ = ("kind", "name", "sent_at", "done", "error")

    def __init__(self, kind: str, name: str) -> None:
        self.kind = kind
        self.name = name
        #: When the dispatcher sent it (``None``: not yet).
        self.sent_at: float | None = None
        self.done = threading.Event()
        self.error: Exception | None = None

    def resolve(self, error: Exception | None = None) -> None:
        self.error = error
        self.done.set()


class _Channel:
    """A channel's subscribers in this process, and the ``SUBSCRIBE`` that
    registered it (confirmed or not yet)."""

    __slots__ = ("subscribers", "confirmation")

    def __init__(self, confirmation: _Reply) -> None:
        self.subscribers: dict[RedisSubscription, None] = {}
        self.confirmation = confirmation


class SharedPubSub:
    """The process's one pub/sub connection to one server (or cluster node),
    opened by the first subscription, dispatched by one thread, closed after
    ``idle_close`` seconds without subscriptions. ``sharded`` uses
    ``SSUBSCRIBE`` (a cluster's shard channels)."""

    idle_close = IDLE_CLOSE
    ping_interval = PING_INTERVAL

    def __init__(
        self, make_connection: Callable[[], Any], *, where: str, io_timeout: float, sharded: bool = False
    ) -> None:
        self._make_connection = make_connection
        self.where = where
        self.io_timeout = io_timeout
        self._subscribe_command, self._unsubscribe_command = (
            ("SSUBSCRIBE", "SUNSUBSCRIBE") if sharded else ("SUBSCRIBE", "UNSUBSCRIBE")
        )
        self._lock = ProcessLock()
        self._pid = process_id.current
        self._connection: Any = None
        #: The two ends of the socket pair that wakes the dispatcher.
        self._waker: socket.socket | None = None
        self._woken: socket.socket | None = None
        #: Bumped at every connection and every loss of one: a dispatcher
        #: whose generation is past stops.
        self._generation = 0
        self._channels: dict[str, _Channel] = {}
        #: Commands for the dispatcher to send, and the replies awaited, in order.
        self._outbox: list[tuple[tuple[str, ...], _Reply]] = []
        self._replies: deque[_Reply] = deque()
        self._idle_since = time.monotonic()
        self.closed = False

    # -- what subscriptions call ------------------------------------------

    def add(self, subscription: RedisSubscription, names: Iterable[str]) -> None:
        """Register ``subscription`` for ``names``; return once Redis confirmed
        each, so nothing published afterwards is missed. Raises what Redis
        answered instead (``MOVED`` on a cluster), a driver error, or
        :class:`BackendUnavailable`. The caller closes the subscription then."""
        waits: list[_Reply] = []
        with self._lock:
            self._forget_parent()
            if self.closed:
                raise closed_bus(self.where)
            self._connect()
            subscription.join(self)
            for name in names:
                channel = self._channels.get(name)
                if channel is None:
                    channel = self._channels[name] = _Channel(self._queue("subscribe", name))
                channel.subscribers[subscription] = None
                waits.append(channel.confirmation)
        deadline = time.monotonic() + self.io_timeout
        for reply in waits:
            if not reply.done.wait(max(deadline - time.monotonic(), 0.0)):
                raise BackendUnavailable(f"Redis ({self.where}) did not confirm {self._subscribe_command} in time")
            if reply.error is not None:
                raise reply.error

    def remove(self, subscription: RedisSubscription) -> None:
        """Unregister ``subscription``; a channel no subscription wants any
        more is unsubscribed (no channel outlives its last stream)."""
        with self._lock:
            if self._pid != process_id.current:
                return  # a parent's subscription: nothing of it is in this process
            for name in subscription.names:
                channel = self._channels.get(name)
                if channel is None or subscription not in channel.subscribers:
                    continue
                del channel.subscribers[subscription]
                if not channel.subscribers:
                    del self._channels[name]
                    if self._connection is not None:
                        self._queue("unsubscribe", name)
            if not self._channels:
                self._idle_since = time.monotonic()

    def close(self) -> None:
        """Close the connection; every subscription hears "closed", and no new one is made."""
        with self._lock:
            self.closed = True
            self._lose(closed_bus(self.where))

    def connected(self) -> bool:
        """Whether this process holds the connection now (for tests and the bench)."""
        return self._connection is not None and self._pid == process_id.current

    # -- under the lock -----------------------------------------------------

    def _forget_parent(self) -> None:
        """In a forked child: the parent's connection, dispatcher and channels
        are not this process's (their sockets are closed here, not shut down:
        redis-py shuts a socket down only in the process that opened it)."""
        if self._pid == process_id.current:
            return
        self._pid = process_id.current
        connection, ends = self._connection, (self._waker, self._woken)
        self._connection = self._waker = self._woken = None
        self._generation += 1
        self._channels, self._outbox, self._replies = {}, [], deque()
        try:
            if connection is not None:
                connection.disconnect()
            for end in ends:
                if end is not None:
                    end.close()
        except Exception:  # noqa: BLE001, S110 - the parent's: nothing to report here
            pass

    def _connect(self) -> None:
        """Open the connection and start its dispatcher, unless open. Connecting
        holds the lock: the process's other subscriptions wait for this one
        connection rather than opening their own (bounded by the I/O timeout)."""
        if self._connection is not None:
            return
        connection = self._make_connection()
        connection.connect()
        waker, woken = socket.socketpair()
        waker.setblocking(False)
        self._connection, self._waker, self._woken = connection, waker, woken
        self._generation += 1
        self._outbox, self._replies = [], deque()
        thread = threading.Thread(
            target=self._run, args=(connection, waker, woken, self._generation), name="flask-mcp-redis-bus", daemon=True
        )
        thread.start()

    def _queue(self, kind: str, name: str) -> _Reply:
        """Queue a command for the dispatcher to send; the reply to wait for."""
        reply = _Reply(kind, name)
        command = {"subscribe": self._subscribe_command, "unsubscribe": self._unsubscribe_command}.get(kind, "PING")
        self._outbox.append(((command, name) if name else (command,), reply))
        self._replies.append(reply)
        if self._waker is not None:
            try:
                self._waker.send(b"\0")
            except OSError:  # full: the dispatcher has wake-ups to read already
                pass
        return reply

    def _lose(self, fault: BackendUnavailable) -> None:
        """The connection is gone: every subscriber and every waiting command
        hears ``fault``; the next subscription connects again. The dispatcher,
        woken, closes the socket (a socket closed under a redis-py read would
        be opened again by it)."""
        waker = self._waker
        self._connection = self._waker = self._woken = None
        self._generation += 1
        channels, self._channels = self._channels, {}
        replies, self._replies, self._outbox = self._replies, deque(), []
        self._idle_since = time.monotonic()
        for reply in replies:
            reply.resolve(fault)
        for channel in channels.values():
            for subscriber in channel.subscribers:
                subscriber.fail(str(fault))
        if waker is not None:
            try:
                waker.send(b"\0")
            except OSError:  # full: it has wake-ups to read already
                pass

    # -- the dispatcher -----------------------------------------------------

    def _run(self, connection: Any, waker: socket.socket, woken: socket.socket, generation: int) -> None:
        selector = selectors.DefaultSelector()
        try:
            selector.register(connection._sock, selectors.EVENT_READ)
            selector.register(woken, selectors.EVENT_READ)
            woken.setblocking(False)
            self._dispatch(connection, woken, selector, generation)
        except Exception as exc:  # noqa: BLE001 - any fault ends this connection
            fault = as_unavailable(exc, self.where) or BackendUnavailable(f"Redis ({self.where}) is unavailable: {exc}")
            with self._lock:
                if self._generation == generation:
                    logger.warning("Redis message bus: the subscription connection broke: %s", exc)
                    self._lose(fault)
        finally:
            selector.close()
            connection.disconnect()
            waker.close()
            woken.close()

    def _dispatch(self, connection: Any, woken: socket.socket, selector: Any, generation: int) -> None:
        quiet_since = time.monotonic()
        while True:
            while connection.can_read(timeout=0):
                try:
                    reply: Any = connection.read_response()
                except redis.exceptions.ResponseError as exc:  # an error reply, the connection is fine
                    reply = exc
                quiet_since = time.monotonic()
                with self._lock:
                    if self._generation != generation:
                        return
                    self._handle(reply)
            # Judged once the socket was found empty: a dispatcher that did not
            # run for a while (a busy worker) finds the answers waiting, not missing.
            drained_at = time.monotonic()
            with self._lock:
                if self._generation != generation:
                    return
                head = self._replies[0] if self._replies else None
                if head is not None and head.sent_at is not None and drained_at - head.sent_at > self.io_timeout:
                    raise redis.exceptions.TimeoutError(
                        f"no answer to {head.kind.upper()} within {self.io_timeout:g} s"
                    )
                if head is None and not self._channels and drained_at - self._idle_since >= self.idle_close:
                    self._connection = self._waker = self._woken = None  # not "lost": no subscriber to tell
                    self._generation += 1
                    return
                if head is None and drained_at - quiet_since >= self.ping_interval:
                    self._queue("ping", "")
                    quiet_since = drained_at
                outbox, self._outbox = self._outbox, []
            if outbox:
                connection.send_packed_command(connection.pack_commands([c for c, _ in outbox]), check_health=False)
                sent_at = time.monotonic()
                for _, reply in outbox:
                    reply.sent_at = sent_at
            for key, _ in selector.select(TICK):
                if key.fileobj is woken:
                    try:
                        woken.recv(4096)
                    except BlockingIOError:
                        pass

    def _handle(self, reply: Any) -> None:
        """One reply or message (the lock held)."""
        if isinstance(reply, Exception):
            self._resolve(None, None, reply)
            return
        if isinstance(reply, (bytes, str)) and as_text(reply).upper() == "PONG":
            self._resolve("ping", "", None)  # a connection subscribed to nothing answers as any other
            return
        if not isinstance(reply, list) or len(reply) < 2:
            raise redis.exceptions.InvalidResponse(f"unexpected reply on the pub/sub connection: {reply!r}")
        kind, name = as_text(reply[0]).lower(), as_text(reply[1])
        if kind in ("message", "smessage"):
            channel = self._channels.get(name)
            if channel is None:
                return  # published before its unsubscribe was processed
            try:
                # One decoding for every subscriber: they read messages, never change them.
                message = json.loads(reply[2])
            except ValueError:
                logger.warning("Redis message bus: a message on %r is not JSON; dropped", name)
                return
            for subscriber in channel.subscribers:
                subscriber.deliver(name, message)
        elif kind in ("subscribe", "ssubscribe"):
            self._resolve("subscribe", name, None)
        elif kind in ("unsubscribe", "sunsubscribe"):
            head = self._replies[0] if self._replies else None
            if head is not None and head.kind == "unsubscribe" and head.name == name:
                self._resolve("unsubscribe", name, None)
                return
            # Redis ended it (on a cluster: its slot moved to another node).
            channel = self._channels.pop(name, None)
            fault = f"Redis ({self.where}) ended the subscription to {name!r} (its slot moved to another node)"
            for subscriber in channel.subscribers if channel is not None else ():
                subscriber.fail(fault)
        elif kind == "pong":
            self._resolve("ping", "", None)
        else:
            raise redis.exceptions.InvalidResponse(f"unexpected reply on the pub/sub connection: {reply!r}")

    def _resolve(self, kind: str | None, name: str | None, error: Exception | None) -> None:
        """The reply to the oldest command came (``kind`` ``None``: an error reply)."""
        if not self._replies:
            raise redis.exceptions.InvalidResponse(f"a reply nothing asked for: {kind} {name!r} {error}")
        reply = self._replies[0]
        if kind is not None and (reply.kind != kind or reply.name != name):
            raise redis.exceptions.InvalidResponse(
                f"expected the reply to {reply.kind} {reply.name!r}, got {kind} {name!r}"
            )
        self._replies.popleft()
        if error is not None and reply.kind == "subscribe":
            channel = self._channels.get(reply.name)
            if channel is not None and channel.confirmation is reply:
                del self._channels[reply.name]  # not subscribed: its waiting subscribers hear why
        elif error is not None:
            logger.warning("Redis message bus: %s %r answered %s", reply.kind, reply.name, error)
        reply.resolve(error)
