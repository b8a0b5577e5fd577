"""Messages between the processes of one machine, as rows of the SQLite
file: one thread per process polls the table for all of its subscriptions."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Sequence

from ..contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable, Message
from ..memory import MemorySubscription
from .database import SqliteDatabase, database_for

logger = logging.getLogger("flask_mcp")


class _Poller:
    """One thread per process polls the message table for every subscription
    of a bus and hands each row to the subscriptions of its channel. An idle
    subscription then costs nothing of its own (a listen stream under gevent
    used to poll on a connection of its own: 13 µs every 20 ms each). The
    thread runs only while there are subscriptions; a fault is logged and the
    next poll tries again, so subscriptions recover with the file."""

    def __init__(self, bus: SqliteMessageBus) -> None:
        self._bus = bus
        self._lock = threading.Lock()
        #: Each subscription, with the last row id it must not receive.
        self._subscriptions: dict[MemorySubscription, int] = {}
        self._cursor = 0
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._failing = False

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        subscription = MemorySubscription(self, channels)
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's thread is not here
                self._subscriptions, self._thread, self._pid = {}, None, os.getpid()
            with self._bus.database.connection() as connection:
                latest = int(connection.execute("SELECT COALESCE(MAX(id), 0) FROM mcp_messages").fetchone()[0])
            if not self._subscriptions:
                self._cursor = latest
            self._subscriptions[subscription] = latest
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flask-mcp-sqlite-bus", daemon=True)
                self._thread.start()
        return subscription

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            self._subscriptions.pop(subscription, None)

    def _run(self) -> None:
        while True:
            time.sleep(self._bus.poll_interval)
            with self._lock:
                if not self._subscriptions:
                    self._thread = None
                    return
                try:
                    with self._bus.database.connection() as connection:
                        self._deliver(connection)
                except BackendUnavailable as exc:
                    if not self._failing:
                        logger.warning("SQLite message bus: polling failed, retrying: %s", exc)
                    self._failing = True

    def _deliver(self, connection: sqlite3.Connection) -> None:
        rows = connection.execute(
            "SELECT id, channel, payload FROM mcp_messages WHERE id > ? ORDER BY id LIMIT 1000", (self._cursor,)
        ).fetchall()
        self._failing = False
        for row_id, channel, payload in rows:
            self._cursor = int(row_id)
            for subscription, after in self._subscriptions.items():
                if row_id > after and channel in subscription.channels:
                    subscription.deliver(str(channel), json.loads(payload))


class SqliteMessageBus:
    """A message table every process of the machine can append to and poll.
    Rows older than ``retention`` seconds are pruned by publishers."""

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        poll_interval: float = 0.02,
        retention: float = 60.0,
        prune_interval: float = 5.0,
    ) -> None:
        self.database = database_for(database, io_timeout)
        self.poll_interval = poll_interval
        self.retention = retention
        self.prune_interval = prune_interval
        self._last_prune: float | None = None
        self._poller = _Poller(self)

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        now = time.time()
        with self.database.connection() as connection:
            connection.execute(
                "INSERT INTO mcp_messages (channel, payload, created) VALUES (?, ?, ?)", (channel, payload, now)
            )
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                connection.execute("DELETE FROM mcp_messages WHERE created < ?", (now - self.retention,))

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        return self._poller.subscribe(channels)
