"""Resumable streams' events as rows of the SQLite file."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

from ..contracts import DEFAULT_IO_TIMEOUT, Event
from .database import SqliteDatabase, database_for


class SqliteEventLog:
    """Resumable streams' events as rows; a stream is forgotten ``retention``
    seconds after its last event (writers prune, at most every ``prune_interval``)."""

    def __init__(
        self,
        database: str | SqliteDatabase,
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
        with self.database.connection() as connection:
            connection.execute(
                "INSERT OR REPLACE INTO mcp_stream_events (stream, seq, event, created) VALUES (?, ?, ?, ?)",
                (stream, seq, json.dumps(event), now),
            )
            # The whole stream lives as long as its newest event.
            connection.execute("UPDATE mcp_stream_events SET created = ? WHERE stream = ? AND seq = 0", (now, stream))
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                self._prune(connection, now)

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        with self.database.connection() as connection:
            head = connection.execute(
                "SELECT created FROM mcp_stream_events WHERE stream = ? AND seq = 0", (stream,)
            ).fetchone()
            if head is None or self.clock() - head[0] > self.retention:
                return None
            rows = connection.execute(
                "SELECT seq, event FROM mcp_stream_events WHERE stream = ? AND seq > ? ORDER BY seq", (stream, after)
            ).fetchall()
        return [(int(seq), json.loads(event)) for seq, event in rows]

    def _prune(self, connection: sqlite3.Connection, now: float) -> None:
        """Drop every stream whose newest event (its priming row's time) is too old."""
        connection.execute(
            "DELETE FROM mcp_stream_events WHERE stream IN "
            "(SELECT stream FROM mcp_stream_events WHERE seq = 0 AND created < ?)",
            (now - self.retention,),
        )
