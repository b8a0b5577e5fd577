"""The message bus on databases without LISTEN/NOTIFY (MySQL, MariaDB,
SQLite through SQLAlchemy...): messages are rows of ``flask_mcp_messages``,
and one thread per process polls the table for all of its subscriptions."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence

from sqlalchemy import Connection, delete, func, insert, select

from ..contracts import BackendUnavailable, Message
from ..memory import MemorySubscription
from .database import SqlDatabase
from .tables import messages

logger = logging.getLogger("flask_mcp")

_ID, _CHANNEL, _PAYLOAD, _CREATED = messages.c.id, messages.c.channel, messages.c.payload, messages.c.created


class _Poller:
    """One thread per process reads the rows added since its last look and
    hands each to the subscriptions of its channel. It runs while there are
    subscriptions; a failed poll is logged once and the next one tries again
    (the rows wait in the table, so nothing is lost while it fails).

    Ids are handed out when a row is inserted, not when it is committed, so a
    row can appear behind a higher id already read (two publishers at once on
    MySQL): each poll looks ``LOOKBACK`` ids behind the highest seen and
    skips the ones it delivered."""

    LOOKBACK = 64

    def __init__(self, bus: PollingMessageBus) -> None:
        self._bus = bus
        self._lock = threading.Lock()
        #: Each subscription, with the highest row id it must not receive.
        self._subscriptions: dict[MemorySubscription, int] = {}
        self._cursor = 0
        self._seen: set[int] = set()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._failing = False
        self.closed = False

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        if self.closed:
            raise BackendUnavailable("the SQL message bus is closed")
        subscription = MemorySubscription(self, channels)
        latest = self._bus.database.run(lambda c: int(c.execute(select(func.coalesce(func.max(_ID), 0))).scalar_one()))
        with self._lock:
            if self._pid != os.getpid():  # forked: the parent's thread is not here
                self._subscriptions, self._thread, self._pid = {}, None, os.getpid()
            if not self._subscriptions:
                self._cursor, self._seen = latest, set()
            self._subscriptions[subscription] = latest
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="flask-mcp-sql-bus", daemon=True)
                self._thread.start()
        return subscription

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            self._subscriptions.pop(subscription, None)

    def close(self) -> None:
        """End every subscription (their readers see the bus unavailable) and
        refuse new ones; the thread stops at its next look, finding none."""
        with self._lock:
            self.closed = True
            subscriptions, self._subscriptions = list(self._subscriptions), {}
        for subscription in subscriptions:
            subscription.fail("the SQL message bus is closed")

    def _fetch(self, low: int) -> list[tuple[int, str, str]]:
        query = select(_ID, _CHANNEL, _PAYLOAD).where(_ID > low).order_by(_ID).limit(1000)
        rows = self._bus.database.run(lambda c: c.execute(query).all())
        return [(int(row_id), str(channel), str(payload)) for row_id, channel, payload in rows]

    def _run(self) -> None:
        while True:
            time.sleep(self._bus.poll_interval)
            with self._lock:
                if not self._subscriptions:
                    self._thread = None
                    return
                low = max(0, self._cursor - self.LOOKBACK)
            try:
                rows = self._fetch(low)
            except BackendUnavailable as exc:
                if not self._failing:
                    logger.warning("SQL message bus: polling failed, retrying: %s", exc)
                self._failing = True
                continue
            self._failing = False
            with self._lock:
                for row_id, channel, payload in rows:
                    if row_id in self._seen:
                        continue
                    self._seen.add(row_id)
                    self._cursor = max(self._cursor, row_id)
                    for subscription, after in self._subscriptions.items():
                        if row_id > after and channel in subscription.channels:
                            subscription.deliver(str(channel), json.loads(payload))
                floor = self._cursor - self.LOOKBACK
                self._seen = {seen for seen in self._seen if seen > floor}


class PollingMessageBus:
    """A message table every process on every host can append to and poll
    (every ``poll_interval`` seconds). Publishers delete rows older than
    ``retention`` seconds, at most every ``prune_interval``."""

    def __init__(
        self,
        database: SqlDatabase,
        *,
        poll_interval: float = 0.05,
        retention: float = 60.0,
        prune_interval: float = 5.0,
    ) -> None:
        self.database = database
        self.poll_interval = poll_interval
        self.retention = retention
        self.prune_interval = prune_interval
        self._last_prune: float | None = None
        self._poller = _Poller(self)

    def publish(self, channel: str, message: Message) -> None:
        payload = json.dumps(message)
        now = time.time()
        prune = self._last_prune is None or now - self._last_prune >= self.prune_interval
        if prune:
            self._last_prune = now

        def publish(connection: Connection) -> None:
            connection.execute(insert(messages).values(channel=channel, payload=payload, created=now))
            if prune:
                connection.execute(delete(messages).where(_CREATED < now - self.retention))

        self.database.run(publish)

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        return self._poller.subscribe(channels)

    def close(self) -> None:
        """Stop polling (``Backend.close``): open subscriptions, and new ones, report the bus unavailable."""
        self._poller.close()
