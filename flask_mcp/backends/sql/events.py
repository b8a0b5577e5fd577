"""Resumable streams' events as rows of the app's database (``flask_mcp_stream_events``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, delete, insert, select, update

from ..contracts import DEFAULT_IO_TIMEOUT, Event
from .database import SqlDatabase, database_for
from .tables import stream_events as table

_STREAM, _SEQ, _EVENT, _CREATED = table.c.stream, table.c.seq, table.c.event, table.c.created


class SqlEventLog:
    """Each event a row; a stream is forgotten ``retention`` seconds after its
    last event (the time its priming row carries; writers prune, at most every
    ``prune_interval``)."""

    #: Streams forgotten per statement (each id is a bound parameter).
    PRUNE_BATCH = 500

    def __init__(
        self,
        database: str | Engine | SqlDatabase,
        *,
        retention: float = 600.0,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        prune_interval: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.database = database_for(database, io_timeout)
        self.retention = retention
        self.prune_interval = prune_interval
        self.clock = clock
        self._last_prune: float | None = None

    def append(self, stream: str, seq: int, event: Event) -> None:
        now = self.clock()
        payload = json.dumps(event)
        prune = self._last_prune is None or now - self._last_prune >= self.prune_interval
        if prune:
            self._last_prune = now

        def append(connection: Connection) -> None:
            # One writer per stream appends each number once; a repeat (a retry
            # after a lost connection) replaces the row.
            connection.execute(delete(table).where(_STREAM == stream, _SEQ == seq))
            connection.execute(insert(table).values(stream=stream, seq=seq, event=payload, created=now))
            if seq:  # the whole stream lives as long as its newest event
                connection.execute(update(table).where(_STREAM == stream, _SEQ == 0).values(created=now))
            if prune:
                self._prune(connection, now - self.retention)

        self.database.retried(append)

    def _prune(self, connection: Connection, before: float) -> None:
        """Forget the streams whose last event is older than ``before``: their
        ids first, then their rows, a batch at a time (one ``DELETE`` whose
        subquery reads the same table is refused by MySQL, error 1093)."""
        while True:
            expired = connection.execute(
                select(_STREAM).where(_SEQ == 0, _CREATED < before).limit(self.PRUNE_BATCH)).scalars().all()
            if expired:
                connection.execute(delete(table).where(_STREAM.in_(expired)))
            if len(expired) < self.PRUNE_BATCH:
                return

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        if "\x00" in stream:  # a client's session id: none of ours holds it
            return None
        now = self.clock()

        def read(connection: Connection) -> list[tuple[int, Event]] | None:
            head = connection.execute(select(_CREATED).where(_STREAM == stream, _SEQ == 0)).first()
            if head is None or now - head[0] > self.retention:
                return None
            rows = connection.execute(
                select(_SEQ, _EVENT).where(_STREAM == stream, _SEQ > after).order_by(_SEQ)
            ).all()
            return [(int(seq), json.loads(event)) for seq, event in rows]

        return self.database.retried(read)
