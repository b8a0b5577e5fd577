"""An in-process session store: one process (threads fine), nothing shared
between gunicorn workers."""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable

from ..protocol.session import Session


class MemorySessionStore:
    """Sessions in a dict guarded by a lock, expiring after ``timeout`` idle seconds."""

    def __init__(self, timeout: float = 3600.0, clock: Callable[[], float] = time.time) -> None:
        self.timeout = timeout
        self.clock = clock
        self._records: dict[str, dict[str, object]] = {}
        self._lock = threading.Lock()

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        with self._lock:
            self._prune(now)
            self._records[session.id] = copy.deepcopy(session.to_dict())

    def get(self, session_id: str) -> Session | None:
        now = self.clock()
        with self._lock:
            record = self._records.get(session_id)
            if record is None:
                return None
            if now - float(record["last_seen"]) > self.timeout:  # type: ignore[arg-type]
                del self._records[session_id]
                return None
            record["last_seen"] = now
            # A copy, so a caller's changes only count once saved.
            return Session.from_dict(copy.deepcopy(record))

    def save(self, session: Session) -> None:
        with self._lock:
            if session.id in self._records:
                self._records[session.id] = copy.deepcopy(session.to_dict())

    def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._records.pop(session_id, None) is not None

    def __len__(self) -> int:
        return len(self._records)

    def _prune(self, now: float) -> None:
        expired = [k for k, r in self._records.items() if now - float(r["last_seen"]) > self.timeout]  # type: ignore[arg-type]
        for key in expired:
            del self._records[key]
