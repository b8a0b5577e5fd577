"""A short path for the session store's one write on ``initialize``.

Every new legacy session is one ``SET key value PX ttl``. Through
``client.set`` redis-py spends most of that request's Redis time in its own
machinery: the pool checkout (a lock, metrics hooks, a non-blocking read of
the socket to check it is clean: three system calls), the retry closures,
the generic command packer and the reply callbacks. Here the command is
packed once as bytes and sent on a connection kept by this object, with the
client's own connection class, settings and retry policy: 224 000 → about
40 000 instructions per ``SET`` (bench/README.md, "Redis: initialize").

Public redis-py API only (``ConnectionPool.make_connection``,
``Connection.send_packed_command`` / ``read_response``, ``Retry.call_with_retry``).
Clients this cannot serve so (a cluster client, a single-connection client,
redis-py's own client-side cache, a pool of another kind, Sentinel's
connections) get ``client.set``."""

from __future__ import annotations

import os
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

import redis


def _direct_pool(client: Any) -> redis.ConnectionPool | None:
    """The client's pool when its connections can be used directly, else ``None``."""
    pool = getattr(client, "connection_pool", None)
    if not isinstance(client, redis.Redis) or not isinstance(pool, redis.ConnectionPool):
        return None
    if getattr(client, "connection", None) is not None or getattr(pool, "cache", None) is not None:
        return None  # single_connection_client, or client-side caching (its proxy must see every command)
    if pool.connection_class not in _PLAIN_CONNECTIONS:
        # A connection class of its own decides where it connects (Sentinel's asks the
        # sentinels for the primary, and pools of its kind move connections after a
        # failover): this path would bypass that, so the client's set() it is.
        return None
    return pool


#: Connection classes whose address is in their settings (TCP, TLS, a Unix socket).
_PLAIN_CONNECTIONS = (redis.Connection, redis.SSLConnection, redis.UnixDomainSocketConnection)


class DirectWrites:
    """``SET ... PX`` on connections made by the client's pool and kept here,
    one per request in flight (a deque: thread- and greenlet-safe)."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._pool = _direct_pool(client)
        self._idle: deque[Any] = deque()
        kwargs = self._pool.connection_kwargs if self._pool is not None else {}
        self._encoding: str = kwargs.get("encoding", "utf-8")
        self._errors: str = kwargs.get("encoding_errors", "strict")
        _LIVE.add(self)
        # No pool knows these connections: close them when this object goes
        # unclosed (an app dropped without Backend.close), not at some later
        # garbage collection that finds a socket still open.
        weakref.finalize(self, _close_kept, self._idle)

    @property
    def direct(self) -> bool:
        """Whether writes take the short path (``False``: ``client.set``)."""
        return self._pool is not None

    def set_px(self, key: str, value: bytes, ttl_ms: int) -> None:
        """``SET key value PX ttl_ms``; redis-py's errors as ``client.set`` raises them."""
        self.begin_set_px(key, value, ttl_ms)()

    def begin_set_px(self, key: str, value: bytes, ttl_ms: int) -> Callable[[], Any]:
        """Send ``SET key value PX ttl_ms`` now; the function returned reads
        its reply (raising what ``client.set`` raises) and must be called once.
        In between the caller does other work: Redis answers meanwhile, and
        the worker need not sleep on the socket (on the benchmark's 2-core VM
        a read that blocks cost about 40 µs more than one whose reply was there)."""
        if self._pool is None:
            self._client.set(key, value, px=ttl_ms)
            return _nothing
        name = key.encode(self._encoding, self._errors)
        ttl = b"%d" % ttl_ms
        packed = b"*5\r\n$3\r\nSET\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$2\r\nPX\r\n$%d\r\n%b\r\n" % (
            len(name), name, len(value), value, len(ttl), ttl
        )
        try:
            connection = self._idle.pop()
        except IndexError:
            connection = self._pool.make_connection()
        return _PendingCommand(self._idle, connection, packed).finish

    def close(self) -> None:
        """Close the kept connections (the client's pool does not know them)."""
        _close_kept(self._idle)


def _close_kept(idle: deque[Any]) -> None:
    while idle:
        try:
            idle.pop().disconnect()
        except IndexError:  # another thread took the last one
            break


def _nothing() -> None:
    return None


class _PendingCommand:
    """One packed command sent on a kept connection, its reply not read yet.

    Sent at once; :meth:`finish` reads the reply under the client's retry
    policy, as ``client.set`` applies it: the first attempt is the read of
    what was sent (or the failure of sending it), a retry closes the
    connection and sends again (``SET`` is idempotent)."""

    __slots__ = ("_connection", "_idle", "_packed", "_send_error", "_sent")

    def __init__(self, idle: deque[Any], connection: Any, packed: bytes) -> None:
        self._idle = idle
        self._connection = connection
        self._packed = packed
        self._send_error: BaseException | None = None
        try:
            connection.send_packed_command((packed,))
        except Exception as exc:  # noqa: BLE001 - handed to the retry policy in finish()
            self._send_error = exc
        self._sent = True

    def finish(self) -> Any:
        connection = self._connection
        try:
            return connection.retry.call_with_retry(self._exchange, lambda error: connection.disconnect())
        except redis.exceptions.ResponseError:
            raise  # the whole reply was read: the connection is still in step
        except BaseException:
            connection.disconnect()  # a reply may be half read: start afresh next time
            raise
        finally:
            self._idle.append(connection)

    def _exchange(self) -> Any:
        connection = self._connection
        if self._sent:  # the first attempt: the command already went (or failed to)
            self._sent = False
            error, self._send_error = self._send_error, None
            if error is not None:
                raise error
        else:
            connection.send_packed_command((self._packed,))
        return connection.read_response()


#: Every DirectWrites of this process: a forked child must not share its
#: parent's sockets. One fork hook instead of a getpid() system call per
#: command, as redis-py's pool makes.
_LIVE: weakref.WeakSet[DirectWrites] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writes in list(_LIVE):
        writes._idle.clear()  # the parent's connections are dropped here, their sockets left to the parent


os.register_at_fork(after_in_child=_after_fork_in_child)
