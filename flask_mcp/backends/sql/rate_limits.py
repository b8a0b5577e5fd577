"""Rate limit counters in the app's database (``flask_mcp_rate_limits``), as
a storage of the ``limits`` package (Flask-Limiter's engine): an app whose
sessions live in its SQL database counts its limits there too, across every
host, as one on Redis counts them in Redis. Imported only when a limit is
counted (``limits`` is the ``ratelimit`` extra)."""

from __future__ import annotations

import time
from typing import Any

from limits.storage import Storage
from sqlalchemy import Connection, case, delete, insert, select, text, update
from sqlalchemy.exc import IntegrityError

from ..contracts import BackendUnavailable
from .database import SqlDatabase
from .tables import rate_limits as table

_KEY, _COUNT, _EXPIRES = table.c.key, table.c.count, table.c.expires


class SqlRateLimitStorage(Storage):
    """Fixed-window counters as rows: an increment is one ``UPDATE`` that
    restarts an expired window (the row lock orders concurrent ones), or the
    ``INSERT`` of a new one. Expired rows are deleted at most once a minute."""

    PRUNE_INTERVAL = 60.0

    def __init__(self, database: SqlDatabase) -> None:
        super().__init__(wrap_exceptions=False)
        self.database = database
        self._last_prune: float | None = None

    @property
    def base_exceptions(self) -> type[Exception] | tuple[type[Exception], ...]:
        return BackendUnavailable

    def incr(self, key: str, expiry: int, amount: int = 1, **_: Any) -> int:
        now = time.time()
        prune = self._last_prune is None or now - self._last_prune >= self.PRUNE_INTERVAL
        if prune:
            self._last_prune = now
        restart = _EXPIRES <= now

        def incr(connection: Connection) -> int:
            changed = connection.execute(
                update(table).where(_KEY == key).values(
                    count=case((restart, amount), else_=_COUNT + amount),
                    expires=case((restart, now + expiry), else_=_EXPIRES),
                )
            )
            if changed.rowcount == 0:
                connection.execute(insert(table).values(key=key, count=amount, expires=now + expiry))
            if prune:
                connection.execute(delete(table).where(_EXPIRES < now))
            return int(connection.execute(select(_COUNT).where(_KEY == key)).scalar_one())

        for _attempt in range(3):
            try:
                return self.database.run(incr)
            except BackendUnavailable as exc:
                if not isinstance(exc.__cause__, IntegrityError):  # another host inserted the key first
                    raise
        return self.database.run(incr)

    def get(self, key: str) -> int:
        now = time.time()
        found = self.database.run(
            lambda connection: connection.execute(select(_COUNT).where(_KEY == key, _EXPIRES > now)).scalar()
        )
        return int(found or 0)

    def get_expiry(self, key: str) -> float:
        now = time.time()
        found = self.database.run(
            lambda connection: connection.execute(select(_EXPIRES).where(_KEY == key, _EXPIRES > now)).scalar()
        )
        return float(found) if found is not None else now

    def check(self) -> bool:
        try:
            self.database.run(lambda connection: connection.execute(text("SELECT 1")).scalar())
        except BackendUnavailable:
            return False
        return True

    def reset(self) -> int | None:
        return self.database.run(lambda connection: connection.execute(delete(table)).rowcount)

    def clear(self, key: str) -> None:
        self.database.run(lambda connection: connection.execute(delete(table).where(_KEY == key)))
