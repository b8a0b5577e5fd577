"""A per-process copy of Redis keys that the server itself keeps honest.

Redis can tell a client when keys it may have cached change (server-assisted
client-side caching, ``CLIENT TRACKING``). Each process opens one connection
of its own in broadcasting mode for one key prefix, so *any* change to a key
under it (``SET``, ``DEL``, an expiry, a TTL refresh) is reported, whichever
connection or host made it:

* over RESP3 (redis-py's default) the connection receives ``invalidate``
  push messages itself;
* over RESP2 it redirects them to itself and subscribes to the
  ``__redis__:invalidate`` channel.

A copy is served only while that connection is known to be live (it is
pinged every ``PING_INTERVAL`` seconds); when it breaks, every copy is
dropped and reads go to Redis until it is back. Where tracking is refused
(a proxy, a server older than 6.0, ``CLIENT`` renamed away, a restricted
managed service) there is no cache at all: a copy nobody invalidates could
answer for a deleted session."""

from __future__ import annotations

import logging
import os
import threading
import time
import zlib
from typing import Any

import redis

logger = logging.getLogger("flask_mcp")

#: Seconds between pings of an idle invalidation connection: how long a
#: connection that died silently can go unnoticed (plus the I/O timeout).
PING_INTERVAL = 1.0
#: Seconds before a broken invalidation connection is opened again.
RECONNECT_DELAY = 1.0
#: Read tickets are per slot: an invalidation only voids reads of its slot.
_SLOTS = 1024


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TrackedCache:
    """Values of keys under ``prefix``, dropped when Redis reports them changed.

    A reader takes a :meth:`ticket` *before* reading a key from Redis and
    hands it back with the value to :meth:`store`, which keeps the value only
    if no invalidation of that key's slot (and no reconnection) happened in
    between: an answer read just before a change is never kept after the
    change's invalidation went by."""

    def __init__(self, pool: redis.ConnectionPool, prefix: str, *, size: int = 4096, io_timeout: float = 5.0) -> None:
        self.prefix = prefix
        self.size = size
        self.io_timeout = io_timeout
        kwargs = dict(pool.connection_kwargs)
        self._pool = redis.ConnectionPool(connection_class=pool.connection_class, max_connections=4, **kwargs)
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._slots = [0] * _SLOTS
        #: Reports received per slot (only the listener changes these).
        self._reports = [0] * _SLOTS
        self._epoch = 0
        #: Whether copies may be served now (the invalidation connection is live).
        self.live = False
        #: Set once the server refused tracking: no cache, no more attempts.
        self.refused: str | None = None
        self._pid = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._connection: Any = None

    # -- the request path -------------------------------------------------

    def get(self, key: str) -> Any:
        """The kept value of ``key``, or ``None``."""
        if not self.live or self._pid != os.getpid():
            self._start()
            return None
        return self._values.get(key)

    def ticket(self, key: str) -> tuple[int, int] | None:
        """Take before reading ``key`` from Redis; ``None`` when nothing may be kept."""
        if not self.live or self._pid != os.getpid():
            return None
        return self._epoch, self._slots[self._slot(key)]

    def store(self, key: str, ticket: tuple[int, int] | None, value: Any) -> None:
        """Keep ``value`` (read after ``ticket`` was taken) unless it may be stale already."""
        if ticket is None:
            return
        with self._lock:
            if not self.live or ticket != (self._epoch, self._slots[self._slot(key)]):
                return
            values = self._values
            if len(values) >= self.size and key not in values:
                values.pop(next(iter(values)), None)  # the oldest entry
            values[key] = value

    def reported(self, key: str) -> int | None:
        """A mark to hand to :meth:`await_report` after changing ``key``; ``None`` when not live."""
        if not self.live or self._pid != os.getpid():
            return None
        return self._reports[self._slot(key)]

    def await_report(self, key: str, mark: int | None, timeout: float = 0.1) -> bool:
        """Wait (at most ``timeout``) until this process's invalidation
        connection has received a report for ``key``'s slot since ``mark``.
        Redis writes a change's reports to every tracking connection before
        it answers the change, so once this one has it, every other worker's
        is at least on its way (see docs/redis.md)."""
        if mark is None:
            return False
        slot = self._slot(key)
        deadline = time.monotonic() + timeout
        while self._reports[slot] == mark:
            if not self.live or time.monotonic() > deadline:
                return False
            time.sleep(0.0002)
        return True

    def forget(self, key: str) -> None:
        """Drop ``key`` now (this process changed or deleted it) and void reads in flight."""
        with self._lock:
            self._values.pop(key, None)
            self._slots[self._slot(key)] += 1

    def close(self) -> None:
        self._stopping = True
        self._drop_all()
        connection = self._connection
        if connection is not None:
            try:
                connection.disconnect()
            except Exception:  # pragma: no cover - best effort at shutdown
                pass
        self._pool.disconnect()

    # -- the invalidation connection ---------------------------------------

    def _slot(self, key: str) -> int:
        return zlib.crc32(key.encode()) & (_SLOTS - 1)

    def _drop_all(self) -> None:
        with self._lock:
            self.live = False
            self._values.clear()
            self._epoch += 1

    def _start(self) -> None:
        """Start the listener in this process (once; again in a forked child)."""
        pid = os.getpid()
        if self._pid == pid or self.refused is not None or self._stopping:
            return
        with self._lock:
            if self._pid == pid:
                return
            self._pid = pid
            self.live = False
            self._values = {}
            self._epoch += 1
            self._connection = None
            self._pool.reset()  # a parent's sockets are not ours
            self._thread = threading.Thread(target=self._run, name="flask-mcp-redis-tracking", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping and self._pid == os.getpid():
            try:
                self._listen()
            except redis.exceptions.ResponseError as exc:
                self.refused = str(exc)
                self._drop_all()
                logger.warning("Redis session cache off: the server refused CLIENT TRACKING (%s)", exc)
                return
            except Exception as exc:  # noqa: BLE001 - any fault: no copies until reconnected
                self._drop_all()
                if not self._stopping:
                    logger.info("Redis session cache paused: invalidation connection lost (%s)", exc)
            connection, self._connection = self._connection, None
            if connection is not None:
                connection.disconnect()
            if not self._stopping:
                time.sleep(RECONNECT_DELAY)

    def _listen(self) -> None:
        connection: Any = self._pool.make_connection()
        self._connection = connection
        connection.connect()
        resp3 = str(getattr(connection, "protocol", 2)) == "3"
        if resp3:
            parser = getattr(connection, "_parser", None)
            if parser is None or not hasattr(parser, "set_invalidation_push_handler"):
                raise redis.exceptions.ResponseError("this redis-py cannot read RESP3 invalidations")
            parser.set_invalidation_push_handler(lambda message: message)
            connection.send_command("CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", self.prefix)
            self._expect_ok(connection.read_response(timeout=self.io_timeout))
        else:
            connection.send_command("CLIENT", "ID")
            own_id = connection.read_response(timeout=self.io_timeout)
            connection.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", own_id, "BCAST", "PREFIX", self.prefix)
            self._expect_ok(connection.read_response(timeout=self.io_timeout))
            connection.send_command("SUBSCRIBE", "__redis__:invalidate")
            connection.read_response(timeout=self.io_timeout)
        # Copies from before this connection may have missed invalidations.
        with self._lock:
            self._values.clear()
            self._epoch += 1
            self.live = True
        pinged_at = time.monotonic()
        awaiting_pong = False
        while not self._stopping:
            if connection.can_read(timeout=PING_INTERVAL):
                message = connection.read_response(push_request=True, timeout=self.io_timeout)
                self._handle(message)
                if awaiting_pong and self._is_pong(message):
                    awaiting_pong = False
                continue
            now = time.monotonic()
            if awaiting_pong and now - pinged_at > self.io_timeout:
                raise redis.exceptions.TimeoutError("no answer to PING on the invalidation connection")
            if not awaiting_pong:
                connection.send_command("PING")
                pinged_at, awaiting_pong = now, True

    @staticmethod
    def _expect_ok(answer: Any) -> None:
        if _text(answer) != "OK":
            raise redis.exceptions.ResponseError(f"CLIENT TRACKING answered {answer!r}")

    @staticmethod
    def _is_pong(message: Any) -> bool:
        if isinstance(message, (bytes, str)):
            return _text(message).upper() == "PONG"
        return isinstance(message, list) and bool(message) and _text(message[0]).lower() == "pong"

    def _handle(self, message: Any) -> None:
        """``[invalidate, keys]`` (RESP3) or ``[message, __redis__:invalidate, keys]``
        (RESP2); ``keys`` is ``None`` when the server flushed everything."""
        if not isinstance(message, list) or not message:
            return
        kind = _text(message[0]).lower()
        if kind == "invalidate" and len(message) == 2:
            keys = message[1]
        elif kind == "message" and len(message) == 3 and _text(message[1]) == "__redis__:invalidate":
            keys = message[2]
        else:
            return
        if keys is None:
            with self._lock:
                self._values.clear()
                self._epoch += 1
            return
        with self._lock:
            for key in keys:
                name = _text(key)
                self._values.pop(name, None)
                slot = self._slot(name)
                self._slots[slot] += 1
                self._reports[slot] += 1
