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

    @property
    def direct(self) -> bool:
        """Whether writes take the short path (``False``: ``client.set``)."""
        return self._pool is not None

    def set_px(self, key: str, value: bytes, ttl_ms: int) -> None:
        """``SET key value PX ttl_ms``; redis-py's errors as ``client.set`` raises them."""
        if self._pool is None:
            self._client.set(key, value, px=ttl_ms)
            return
        name = key.encode(self._encoding, self._errors)
        ttl = b"%d" % ttl_ms
        self._run(
            b"*5\r\n$3\r\nSET\r\n$%d\r\n%b\r\n$%d\r\n%b\r\n$2\r\nPX\r\n$%d\r\n%b\r\n"
            % (len(name), name, len(value), value, len(ttl), ttl)
        )

    def close(self) -> None:
        """Close the kept connections (the client's pool does not know them)."""
        while self._idle:
            try:
                self._idle.pop().disconnect()
            except IndexError:  # another thread took the last one
                break

    def _run(self, packed: bytes) -> Any:
        assert self._pool is not None
        try:
            connection = self._idle.pop()
        except IndexError:
            connection = self._pool.make_connection()
        try:
            # The client's retry policy, as client.set applies it: on the
            # errors it retries, the connection is closed and opened again.
            return connection.retry.call_with_retry(
                lambda: self._exchange(connection, packed), lambda error: connection.disconnect()
            )
        except redis.exceptions.ResponseError:
            raise  # the whole reply was read: the connection is still in step
        except BaseException:
            connection.disconnect()  # a reply may be half read: start afresh next time
            raise
        finally:
            self._idle.append(connection)

    @staticmethod
    def _exchange(connection: Any, packed: bytes) -> Any:
        connection.send_packed_command((packed,))
        return connection.read_response()


#: Every DirectWrites of this process: a forked child must not share its
#: parent's sockets. One fork hook instead of a getpid() system call per
#: command, as redis-py's pool makes.
_LIVE: weakref.WeakSet[DirectWrites] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for writes in list(_LIVE):
        writes._idle = deque()  # the parent's sockets are left to the parent


os.register_at_fork(after_in_child=_after_fork_in_child)
