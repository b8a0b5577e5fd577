"""Task records as rows of the app's database (``flask_mcp_tasks``)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from sqlalchemy import Connection, Engine, delete, func, insert, or_, select, update

from ..contracts import DEFAULT_IO_TIMEOUT, BackendUnavailable, StoreCount, TaskRecord
from .database import SqlDatabase, database_for
from .tables import tasks as table

_ID, _RECORD, _EXPIRES, _VERSION = table.c.id, table.c.record, table.c.expires, table.c.version


class SqlTaskStore:
    """Task records as JSON rows with their expiry. An update is a
    compare-and-set on the row's ``version`` (read, change, write only if no
    one wrote meanwhile, else again), which needs no row locks and works the
    same on every database."""

    #: Compare-and-set attempts before an update gives up (only ever reached
    #: when other workers keep changing the same task faster than this one can).
    MAX_ATTEMPTS = 100

    def __init__(
        self,
        database: str | Engine | SqlDatabase,
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
        payload = json.dumps(record.to_dict())
        prune = self._last_prune is None or now - self._last_prune >= self.prune_interval
        if prune:
            self._last_prune = now

        def create(connection: Connection) -> None:
            connection.execute(delete(table).where(_ID == record.task_id))
            connection.execute(
                insert(table).values(id=record.task_id, record=payload, expires=record.expires_at, version=0)
            )
            if prune:
                connection.execute(delete(table).where(_EXPIRES < now))

        self.database.retried(create)

    def get(self, task_id: str) -> TaskRecord | None:
        if "\x00" in task_id:  # no id of ours; PostgreSQL text cannot hold it (an error, not "unknown")
            return None
        found = self.database.retried(lambda connection: self._read(connection, task_id))
        return None if found is None else found[0]

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        if "\x00" in task_id:
            return None
        for _ in range(self.MAX_ATTEMPTS):
            found = self.database.retried(lambda connection: self._read(connection, task_id))
            if found is None:
                return None
            record, version = found
            if not change(record):
                return record
            payload = json.dumps(record.to_dict())

            def write(connection: Connection, version: int = version, payload: str = payload) -> bool:
                written = connection.execute(
                    update(table).where(_ID == task_id, _VERSION == version).values(record=payload, version=version + 1)
                )
                return written.rowcount > 0

            if self.database.run(write):
                return record
        raise BackendUnavailable(f"task {task_id} kept changing under {self.MAX_ATTEMPTS} attempts to update it")

    def count(self) -> StoreCount:
        """Tasks within their TTL, and expired rows not deleted yet."""
        now = self.clock()

        def count(connection: Connection) -> StoreCount:
            total = connection.execute(select(func.count()).select_from(table)).scalar_one()
            expired = connection.execute(select(func.count()).where(_EXPIRES < now)).scalar_one()
            return StoreCount(int(total) - int(expired), int(expired))

        return self.database.retried(count)

    def count_by_status(self) -> dict[str, int]:
        """Tasks within their TTL, by status (the records are read: JSON
        functions differ from one database to the next)."""
        now = self.clock()
        rows = self.database.retried(
            lambda connection: connection.execute(
                select(_RECORD).where(or_(_EXPIRES.is_(None), _EXPIRES >= now))
            ).scalars().all()
        )
        counts: dict[str, int] = {}
        for row in rows:
            status = str(json.loads(row).get("status"))
            counts[status] = counts.get(status, 0) + 1
        return counts

    def unfinished(self, limit: int) -> list[TaskRecord]:
        """Tasks within their TTL that have not ended, oldest first (the records
        are read and sorted here: JSON functions differ from one database to the next)."""
        now = self.clock()
        rows = self.database.retried(
            lambda connection: connection.execute(
                select(_RECORD).where(or_(_EXPIRES.is_(None), _EXPIRES >= now))
            ).scalars().all()
        )
        records = [TaskRecord.from_dict(json.loads(row)) for row in rows]
        running = [record for record in records if not record.terminal]
        running.sort(key=lambda record: (record.created_at, record.task_id))
        return running[:limit]

    def prune(self) -> int:
        """Delete every expired task; how many were deleted."""
        now = self.clock()
        expired = delete(table).where(_EXPIRES < now)
        return self.database.retried(lambda connection: connection.execute(expired).rowcount)

    def _read(self, connection: Connection, task_id: str) -> tuple[TaskRecord, int] | None:
        row = connection.execute(
            select(_RECORD, _VERSION).where(_ID == task_id, or_(_EXPIRES.is_(None), _EXPIRES >= self.clock()))
        ).first()
        return None if row is None else (TaskRecord.from_dict(json.loads(row[0])), int(row[1]))
