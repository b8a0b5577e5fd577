"""The message bus on PostgreSQL's LISTEN/NOTIFY: one listening connection
per process, whatever the number of subscriptions, and a thread that hands
each notification to the subscriptions of its channel (as the SQLite bus's
one poller per process does). Every process of every host that shares the
database hears every message; a message longer than a NOTIFY payload may
be (8000 bytes) travels as a row of ``flask_mcp_messages``, its id in the
notification.

Under gevent the listening thread is a greenlet: it waits for its socket
through the ``select`` module as it is when it waits (gevent's once gevent
patched the process), not through psycopg's own wait, which psycopg picks
when it is imported and which blocks the whole worker if psycopg came
before the patching (``gunicorn --preload``)."""

from __future__ import annotations

import json
import logging
import os
import select as os_select  # the module (sqlalchemy's select is a query)
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Connection, delete, insert, select, text

from ..contracts import BackendUnavailable, Message
from ..memory import MemorySubscription
from .database import SqlDatabase
from .tables import messages

logger = logging.getLogger("flask_mcp")

#: The one PostgreSQL channel flask-mcp notifies on (a bus channel is part of the payload).
PG_CHANNEL = "flask_mcp"
#: Payloads (UTF-8 bytes) above this go through the messages table (PostgreSQL's limit is 8000).
MAX_PAYLOAD = 7900
#: A notification naming a row of ``flask_mcp_messages`` starts with this.
_ROW = "#"
#: A notification that a session changed (its id follows): copies of it are dropped.
_INVALIDATE = "!"
#: The listening connection's ``application_name`` (after the app's own, if it
#: set one), so that operators can tell it in ``pg_stat_activity``.
LISTENER_NAME = "flask-mcp-listener"


def listener_name(application_name: str | None) -> str:
    """The listening connection's ``application_name``: the app's, if any,
    then ``flask-mcp-listener``, within PostgreSQL's 63 bytes."""
    if not application_name:
        return LISTENER_NAME
    room = 63 - len(LISTENER_NAME) - 1
    return application_name.encode()[:room].decode(errors="ignore") + " " + LISTENER_NAME


def _wait_readable(connection: Any, timeout: float) -> None:
    """Return when ``connection``'s socket has something to read or after
    ``timeout`` seconds (``poll``: descriptors above 1023 are fine)."""
    fileno = connection.fileno()
    if hasattr(os_select, "poll"):
        poller = os_select.poll()
        poller.register(fileno, os_select.POLLIN | os_select.POLLERR | os_select.POLLHUP)
        poller.poll(timeout * 1000)
    else:  # Windows
        os_select.select([fileno], [], [fileno], timeout)


class _Listener:
    """The process's listening connection and its thread. Started by the
    first subscription, kept until the bus closes or the connection breaks;
    a break fails every current subscription (their callers subscribe
    again, which reconnects) and is logged once."""

    #: Seconds without a notification after which the thread checks its
    #: connection (a server gone without closing the socket is noticed then).
    KEEPALIVE = 5.0

    def __init__(self, bus: PostgresMessageBus) -> None:
        self._bus = bus
        self._lock = threading.Lock()
        self._subscriptions: set[MemorySubscription] = set()
        self._connection: Any = None
        self._pid = os.getpid()
        self.closed = False
        #: Bumped whenever the connection opens or breaks: a session copy read
        #: under one epoch is not trusted under another (invalidations were missed).
        self.epoch = 0
        #: Called with the id of each session another worker changed (``!<id>`` notifications).
        self.invalidation_handlers: list[Callable[[str], None]] = []
        self._next_attempt = 0.0

    @property
    def listening(self) -> bool:
        return self._connection is not None and self._pid == os.getpid()

    def live_epoch(self) -> int | None:
        """The current epoch while this process listens, else ``None`` (after
        starting the connection when no attempt failed in the last second)."""
        if self.listening:
            return self.epoch
        if self.closed or time.monotonic() < self._next_attempt:
            return None
        with self._lock:
            if self._pid != os.getpid():
                self._subscriptions, self._connection, self._pid = set(), None, os.getpid()
            if self._connection is None:
                try:
                    self._start()
                except BackendUnavailable:
                    self._next_attempt = time.monotonic() + 1.0
                    return None
        return self.epoch

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        subscription = MemorySubscription(self, channels)
        with self._lock:
            if self.closed:
                raise BackendUnavailable("the PostgreSQL message bus is closed")
            if self._pid != os.getpid():  # forked: the parent's connection and thread are not ours
                self._subscriptions, self._connection, self._pid = set(), None, os.getpid()
            if self._connection is None:
                self._start()
            self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            self._subscriptions.discard(subscription)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            connection, self._connection = self._connection, None
            subscriptions, self._subscriptions = self._subscriptions, set()
        for subscription in subscriptions:
            subscription.fail("the PostgreSQL message bus is closed")
        if connection is not None and self._pid == os.getpid():
            try:
                connection.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass

    def _start(self) -> None:
        """Open the listening connection (LISTEN is in effect when this returns:
        what is published afterwards reaches the new subscription)."""
        connection = None
        try:
            connection = self._bus.database.listening_connection()
            name = listener_name(connection.info.parameter_status("application_name"))
            connection.execute("SELECT set_config('application_name', %s, false)", [name])
            connection.execute(f"LISTEN {PG_CHANNEL}")
        except Exception as exc:  # noqa: BLE001 - any driver error: the bus is unavailable
            if connection is not None:
                connection.close()
            raise BackendUnavailable(f"PostgreSQL message bus ({self._bus.database.describe()}) "
                                     f"cannot listen: {type(exc).__name__}: {exc}") from exc
        self._connection = connection
        self.epoch += 1
        thread = threading.Thread(target=self._run, args=(connection,), name="flask-mcp-pg-listener", daemon=True)
        thread.start()

    def _run(self, connection: Any) -> None:
        checked = time.monotonic()
        try:
            while self._connection is connection:
                _wait_readable(connection, 1.0)
                # What arrived, and what came in during the keepalive's round trip.
                for notify in connection.notifies(timeout=0):
                    checked = time.monotonic()
                    self._dispatch(notify.payload)
                if time.monotonic() - checked >= self.KEEPALIVE:
                    connection.execute("SELECT 1")
                    checked = time.monotonic()
        except Exception as exc:  # noqa: BLE001 - the connection broke (or was closed)
            self._broken(connection, f"{type(exc).__name__}: {exc}")

    def _broken(self, connection: Any, reason: str) -> None:
        with self._lock:
            if self._connection is not connection:
                return  # closed on purpose, or already replaced
            self._connection = None
            self.epoch += 1
            subscriptions, self._subscriptions = self._subscriptions, set()
        message = f"PostgreSQL message bus ({self._bus.database.describe()}) lost its listening connection: {reason}"
        logger.warning("%s; subscribing again reconnects", message)
        for subscription in subscriptions:
            subscription.fail(message)
        try:
            connection.close()
        except Exception:  # noqa: BLE001 - it is broken already
            pass

    def _dispatch(self, payload: str) -> None:
        if payload.startswith(_INVALIDATE):
            for handler in self.invalidation_handlers:
                handler(payload[len(_INVALIDATE):])
            return
        try:
            if payload.startswith(_ROW):
                row_id = int(payload[len(_ROW):])
                payload = self._bus.database.run(
                    lambda c: c.execute(select(messages.c.payload).where(messages.c.id == row_id)).scalar_one()
                )
            channel, message = json.loads(payload)
        except (BackendUnavailable, ValueError, TypeError, LookupError) as exc:
            logger.warning("PostgreSQL message bus: a message could not be read (%s); it is dropped", exc)
            return
        with self._lock:
            receivers = [s for s in self._subscriptions if channel in s.channels]
        for subscription in receivers:
            subscription.deliver(channel, message)


class PostgresMessageBus:
    """``NOTIFY`` on publish (committed with the statement, so delivered in
    commit order to every listening process), ``LISTEN`` on one connection
    per process for all of its subscriptions."""

    def __init__(self, database: SqlDatabase, *, retention: float = 60.0, prune_interval: float = 5.0) -> None:
        self.database = database
        #: How long a long message's row is kept (its listeners read it at once).
        self.retention = retention
        self.prune_interval = prune_interval
        self._last_prune: float | None = None
        self._listener = _Listener(self)

    @property
    def listening(self) -> bool:
        """Whether this process holds its listening connection now."""
        return self._listener.listening

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps([channel, message])
        now = time.time()
        prune = len(payload) > MAX_PAYLOAD // 4 and (
            self._last_prune is None or now - self._last_prune >= self.prune_interval
        )

        def publish(connection: Connection) -> None:
            notice = payload
            if len(payload.encode()) > MAX_PAYLOAD:
                row = connection.execute(insert(messages).values(channel=channel, payload=payload, created=now))
                key = row.inserted_primary_key
                assert key is not None
                notice = _ROW + str(key[0])
            connection.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": PG_CHANNEL, "payload": notice})
            if prune:
                self._last_prune = now
                connection.execute(delete(messages).where(messages.c.created < now - self.retention))

        self.database.run(publish)

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        return self._listener.subscribe(channels)

    def live_epoch(self) -> int | None:
        """See :meth:`_Listener.live_epoch` (the session store's copies use it)."""
        return self._listener.live_epoch()

    def on_invalidation(self, handler: Callable[[str], None]) -> None:
        """Call ``handler(session_id)`` for every session another worker changed."""
        self._listener.invalidation_handlers.append(handler)

    def close(self) -> None:
        """Close the listening connection (``Backend.close``)."""
        self._listener.close()


#: Run after a session's row changed (in the same connection): every
#: listening worker drops its copy of that session.
INVALIDATE_SESSION = text(f"SELECT pg_notify('{PG_CHANNEL}', '{_INVALIDATE}' || :id)")
