"""A per-process copy of Redis keys that the server itself keeps honest.

Redis can tell a client when keys it read change (server-assisted client-side
caching, ``CLIENT TRACKING``). Each process opens one listening connection,
and reads the keys it means to keep through a few connections of its own
whose tracking is redirected to it. Redis then reports any later change to a
key read that way (``SET``, ``DEL``, an expiry, a TTL refresh), whichever
connection or host made it; keys this process never read (other workers'
new sessions) cost it nothing. The listener receives the reports

* over RESP3 (redis-py's default) as ``invalidate`` push messages;
* over RESP2 as messages on the ``__redis__:invalidate`` channel it subscribes to.

A copy is served only while the listener is known to be live (it is pinged
every ``PING_INTERVAL`` seconds); when it breaks, every copy is dropped and
reads go to Redis until it is back. Where tracking is refused (a proxy, a
server older than 6.0, ``CLIENT`` renamed away, a restricted managed
service) there is no cache at all: a copy nobody invalidates could answer for
a deleted session."""

from __future__ import annotations

import logging
import threading
import time
import zlib
from typing import Any

import redis

from ..protocol import process_id

logger = logging.getLogger("flask_mcp")

#: Seconds between pings of an idle invalidation connection: how long a
#: connection that died silently can go unnoticed (plus the I/O timeout).
PING_INTERVAL = 1.0
#: Seconds before a broken invalidation connection is opened again.
RECONNECT_DELAY = 1.0
#: Read tickets are per slot: an invalidation only voids reads of its slot.
_SLOTS = 1024


#: Words in an error of ``CLIENT ID`` / ``CLIENT TRACKING`` that mean the
#: server (or a proxy in front of it) will never allow tracking; any other
#: error (a dead redirect target, ``LOADING``, a failover) is passing.
_REFUSALS = (
    "unknown command",
    "unknown subcommand",
    "noperm",
    "not allowed",
    "unsupported",
    "not supported",
    "disabled",
)


class _Refused(Exception):
    """Tracking is unsupported or forbidden here: no cache for this process."""


def _refusal(exc: redis.exceptions.ResponseError) -> _Refused | None:
    text = str(exc)
    if isinstance(exc, redis.exceptions.NoPermissionError) or any(word in text.lower() for word in _REFUSALS):
        return _Refused(text)
    return None


#: What :meth:`TrackedCache.read` answers when it could not read through a
#: tracked connection (the caller then reads the usual way).
MISSING: Any = object()


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TrackedCache:
    """Values of keys read through :meth:`read`, dropped when Redis reports them changed.

    A read takes a ticket (the key's slot counter) *before* asking Redis and
    keeps the answer only if no report for that slot (and no reconnection)
    came in between: an answer read just before a change is never kept after
    the change's report went by."""

    def __init__(self, pool: redis.ConnectionPool, *, size: int = 4096, io_timeout: float = 5.0) -> None:
        self.size = size
        self.io_timeout = io_timeout
        kwargs = dict(pool.connection_kwargs)
        # Maintenance notifications belong to the app's own pool (and need RESP3).
        kwargs.pop("maint_notifications_pool_handler", None)
        kwargs.pop("maint_notifications_config", None)
        self._listen_pool = redis.ConnectionPool(connection_class=pool.connection_class, max_connections=4, **kwargs)
        # Tracked reads speak RESP2 whatever the app's client does: over RESP3
        # a broken redirection would arrive as a push in the middle of a reply.
        kwargs["protocol"] = 2
        # Tracking belongs to the socket, so it is switched on as part of every
        # (re)connect, including the silent ones redis-py makes after the
        # server closed an idle socket.
        self._app_connect_func = kwargs.pop("redis_connect_func", None)
        kwargs["redis_connect_func"] = self._on_read_connect
        self._read_pool = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
        self._lock = threading.Lock()
        self._values: dict[str, Any] = {}
        self._slots = [0] * _SLOTS
        #: Bumped at every (re)connection of the listener.
        self._generation = 0
        self._listener_id: int | None = None
        #: Whether copies may be served now (the listener is live).
        self.live = False
        #: Set once the server refused tracking: no cache, no more attempts.
        self.refused: str | None = None
        self._pid = 0
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._connection: Any = None

    # -- the request path -------------------------------------------------

    def get(self, key: str) -> Any:
        """The kept ``(read_at, value)`` of ``key``, or ``None``."""
        if not self.live or self._pid != process_id.current:
            self._start()
            return None
        return self._values.get(key)

    def read(self, key: str, read_at: float) -> Any:
        """``GET key`` through a tracked connection, keeping ``(read_at, answer)``
        when it may be kept; :data:`MISSING` when no tracked read was possible
        or the key was not there."""
        generation = self._generation
        if not self.live or self._pid != process_id.current or self._listener_id is None:
            return MISSING
        try:
            connection: Any = self._read_pool.get_connection()
        except _Refused as exc:
            self._refuse(str(exc))
            return MISSING
        except redis.exceptions.ResponseError:
            return MISSING  # tracking could not be switched on now (e.g. the listener just died)
        try:
            if getattr(connection, "flask_mcp_tracking", None) != generation:
                # Redirected to an older listener (or not at all): connect anew.
                connection.disconnect()
                connection.connect()
                if connection.flask_mcp_tracking != generation:
                    return MISSING
            ticket = self._epoch_and_slot(key)
            connection.send_command("GET", key)
            value = connection.read_response()
        except _Refused as exc:
            self._refuse(str(exc))
            return MISSING
        except redis.exceptions.ResponseError:
            # READONLY during a failover, LOADING, WRONGTYPE...: the caller's own
            # GET reports it; the cache stays on.
            return MISSING
        except BaseException:
            connection.disconnect()
            raise
        finally:
            self._read_pool.release(connection)
        if value is None:
            # Not kept, and not trusted: this connection may be on a former
            # primary (now a replica resyncing, which answers nil for a while);
            # "no such session" is a 404, so the caller asks the primary itself.
            return MISSING
        with self._lock:
            if self.live and self._generation == generation and ticket == self._epoch_and_slot(key):
                values = self._values
                if len(values) >= self.size and key not in values:
                    values.pop(next(iter(values)), None)  # the oldest entry
                values[key] = (read_at, value)
        return value

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
        self._listen_pool.disconnect()
        self._read_pool.disconnect()

    # -- tracking ---------------------------------------------------------

    def _slot(self, key: str) -> int:
        return zlib.crc32(key.encode()) & (_SLOTS - 1)

    def _epoch_and_slot(self, key: str) -> tuple[int, int]:
        return self._generation, self._slots[self._slot(key)]

    def _on_read_connect(self, connection: Any) -> None:
        """Run by redis-py on every (re)connect of a read connection: redirect
        its tracking to the listener and mark the connection with the listener
        generation it is tracked for (no mark: not tracked)."""
        if getattr(connection, "flask_mcp_tracking", None) is not None:
            # Reconnecting: Redis stops reporting on the keys read over the old
            # socket, so copies of them can no longer be trusted.
            self._drop_copies()
        connection.flask_mcp_tracking = None
        if self._app_connect_func is not None:
            self._app_connect_func(connection)
        else:
            connection.on_connect()
        with self._lock:
            generation, listener = self._generation, self._listener_id
        if listener is None:
            return
        connection.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", listener)
        try:
            self._expect_ok(connection.read_response(timeout=self.io_timeout))
        except redis.exceptions.ResponseError as exc:
            refused = _refusal(exc)
            if refused is None:
                raise  # passing (redis-py closes the socket)
            connection.disconnect()
            raise refused from exc
        except _Refused:
            connection.disconnect()
            raise
        connection.flask_mcp_tracking = generation

    def _refuse(self, reason: str) -> None:
        if self.refused is None:
            logger.warning("Redis session cache off: the server refused CLIENT TRACKING (%s)", reason)
        self.refused = reason
        self._stopping = True
        self._drop_all()

    def _drop_all(self) -> None:
        with self._lock:
            self.live = False
            self._values.clear()
            self._generation += 1
            # A read between now and the next listener must not redirect to a dead id.
            self._listener_id = None

    def _drop_copies(self) -> None:
        """Drop every copy and void reads in flight, tracked connections stay as they are."""
        with self._lock:
            self._values.clear()
            self._slots = [count + 1 for count in self._slots]

    def _start(self) -> None:
        """Start the listener in this process (once; again in a forked child)."""
        pid = process_id.current
        if self._pid == pid or self.refused is not None or self._stopping:
            return
        with self._lock:
            if self._pid == pid:
                return
            self._pid = pid
            self.live = False
            self._values = {}
            self._generation += 1
            self._connection = None
            self._listen_pool.reset()  # a parent's sockets are not ours
            self._read_pool.reset()
            self._thread = threading.Thread(target=self._run, name="flask-mcp-redis-tracking", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping and self._pid == process_id.current:
            try:
                self._listen()
            except _Refused as exc:
                self._refuse(str(exc))
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
        connection: Any = self._listen_pool.make_connection()
        self._connection = connection
        connection.connect()
        if str(getattr(connection, "protocol", 2)) == "3":
            parser = getattr(connection, "_parser", None)
            if parser is None or not hasattr(parser, "set_invalidation_push_handler"):
                raise _Refused("this redis-py cannot read RESP3 invalidations")
            parser.set_invalidation_push_handler(lambda message: message)
            own_id = self._client_id(connection)
        else:
            own_id = self._client_id(connection)
            connection.send_command("SUBSCRIBE", "__redis__:invalidate")
            connection.read_response(timeout=self.io_timeout)
        # Copies from before this connection may have missed reports, and
        # tracked connections still redirect to the old one.
        with self._lock:
            self._values.clear()
            self._generation += 1
            self._listener_id = own_id
            self.live = True
        pinged_at = time.monotonic()
        awaiting_pong = False
        while not self._stopping:
            if connection.can_read(timeout=PING_INTERVAL):
                message = connection.read_response(push_request=True, timeout=self.io_timeout)
                if awaiting_pong and self._is_pong(message):
                    awaiting_pong = False
                else:
                    self._handle(message)
                continue
            now = time.monotonic()
            if awaiting_pong and now - pinged_at > self.io_timeout:
                raise redis.exceptions.TimeoutError("no answer to PING on the invalidation connection")
            if not awaiting_pong:
                connection.send_command("PING")
                pinged_at, awaiting_pong = now, True

    def _client_id(self, connection: Any) -> int:
        connection.send_command("CLIENT", "ID")
        try:
            answer = connection.read_response(timeout=self.io_timeout)
        except redis.exceptions.ResponseError as exc:
            refused = _refusal(exc)
            if refused is not None:
                raise refused from exc
            raise
        if not isinstance(answer, int):
            raise _Refused(f"CLIENT ID answered {answer!r}")
        return answer

    @staticmethod
    def _expect_ok(answer: Any) -> None:
        if _text(answer) != "OK":
            raise _Refused(f"CLIENT TRACKING answered {answer!r}")

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
        with self._lock:
            if keys is None:
                self._values.clear()
                self._generation += 1
                return
            for key in keys:
                name = _text(key)
                self._values.pop(name, None)
                self._slots[self._slot(name)] += 1
