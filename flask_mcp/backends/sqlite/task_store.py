"""Task records as rows of the SQLite file."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Callable

from ...protocol.task_records import TERMINAL
from ..contracts import DEFAULT_IO_TIMEOUT, StoreCount, TaskRecord
from .database import SqliteDatabase, database_for


class SqliteTaskStore:
    """Task records as JSON rows with their expiry; an update is one
    ``BEGIN IMMEDIATE`` transaction, so workers never overwrite each other."""

    def __init__(
        self,
        database: str | SqliteDatabase,
        *,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
        clock: Callable[[], float] = time.time,
        prune_interval: float = 60.0,
    ) -> None:
        self.database = database_for(database, io_timeout)
        self.clock = clock
        self.prune_interval = prune_interval
        self._last_prune: float | None = None

    def create(self, record: TaskRecord) -> None:
        now = self.clock()
        with self.database.connection() as connection:
            connection.execute(
                "INSERT INTO mcp_tasks (id, record, expires) VALUES (?, ?, ?)",
                (record.task_id, json.dumps(record.to_dict()), record.expires_at),
            )
            if self._last_prune is None or now - self._last_prune >= self.prune_interval:
                self._last_prune = now
                connection.execute("DELETE FROM mcp_tasks WHERE expires < ?", (now,))

    def get(self, task_id: str) -> TaskRecord | None:
        with self.database.connection() as connection:
            return self._read(connection, task_id)

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        with self.database.connection() as connection:
            connection.execute("BEGIN IMMEDIATE")
            try:
                record = self._read(connection, task_id)
                if record is not None and change(record):
                    connection.execute(
                        "UPDATE mcp_tasks SET record = ? WHERE id = ?", (json.dumps(record.to_dict()), task_id)
                    )
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        return record

    def count(self) -> StoreCount:
        """Tasks within their TTL, and expired rows not deleted yet."""
        with self.database.connection() as connection:
            total, expired = connection.execute(
                "SELECT COUNT(*), COALESCE(SUM(expires < ?), 0) FROM mcp_tasks", (self.clock(),)
            ).fetchone()
        return StoreCount(int(total) - int(expired), int(expired))

    def count_by_status(self) -> dict[str, int]:
        """Tasks within their TTL, by status: one ``GROUP BY`` over the rows."""
        with self.database.connection() as connection:
            rows = connection.execute(
                "SELECT json_extract(record, '$.status'), COUNT(*) FROM mcp_tasks"
                " WHERE expires IS NULL OR expires >= ? GROUP BY 1",
                (self.clock(),),
            ).fetchall()
        return {str(status): int(n) for status, n in rows}

    def unfinished(self, limit: int) -> list[TaskRecord]:
        """Tasks within their TTL that have not ended, oldest first: one query over the rows."""
        with self.database.connection() as connection:
            rows = connection.execute(
                "SELECT record FROM mcp_tasks WHERE (expires IS NULL OR expires >= ?)"
                " AND json_extract(record, '$.status') NOT IN (?, ?, ?)"
                " ORDER BY json_extract(record, '$.created_at'), id LIMIT ?",
                (self.clock(), *sorted(TERMINAL), limit),
            ).fetchall()
        return [TaskRecord.from_dict(json.loads(row[0])) for row in rows]

    def prune(self) -> int:
        """Delete every expired task; how many were deleted."""
        with self.database.connection() as connection:
            return connection.execute("DELETE FROM mcp_tasks WHERE expires < ?", (self.clock(),)).rowcount

    def _read(self, connection: sqlite3.Connection, task_id: str) -> TaskRecord | None:
        row = connection.execute(
            "SELECT record FROM mcp_tasks WHERE id = ? AND (expires IS NULL OR expires >= ?)",
            (task_id, self.clock()),
        ).fetchone()
        return None if row is None else TaskRecord.from_dict(json.loads(row[0]))
