"""Sessions in a cache the app already has (any cachelib ``BaseCache``, such
as the one Flask-Caching built). A cache offers no publish/subscribe, so
this backend has no message bus.

A cache has no "refresh the TTL" or compare-and-set either, so each session
is two keys: the record (written by ``create``/``save``, kept for twice the
idle timeout and rewritten by a read only every half timeout) and a small
``:seen`` key holding the idle timer (rewritten by every read). Reads thus
almost never rewrite the record, which keeps a read racing a ``save`` in
another worker from undoing it. Caches may also evict entries under memory
pressure (cachelib's ``threshold``): size the cache for the sessions."""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .contracts import BackendUnavailable, NotCountable, Session, StoreCount

if TYPE_CHECKING:
    from cachelib import BaseCache

DEFAULT_KEY_PREFIX = "flask-mcp:session:"


def _unavailable_errors() -> tuple[type[Exception], ...]:
    """OS faults (file caches) and, when loaded, a Redis client's connection faults."""
    errors: list[type[Exception]] = [OSError]
    redis_module = sys.modules.get("redis")
    if redis_module is not None:
        errors += [redis_module.exceptions.ConnectionError, redis_module.exceptions.TimeoutError]
    return tuple(errors)


class CachelibSessionStore:
    """A session store over ``get``/``get_many``/``set``/``delete_many`` of a cachelib cache."""

    def __init__(
        self,
        cache: BaseCache,
        *,
        timeout: float = 3600.0,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.cache = cache
        self.timeout = timeout
        self.key_prefix = key_prefix
        self.clock = clock
        # cachelib wants whole seconds (floats are deprecated; 0 means "forever").
        self._seen_ttl = max(1, math.ceil(timeout))
        self._record_ttl = max(2, math.ceil(2 * timeout))
        self._errors = _unavailable_errors()

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        with self._guard():
            self._write(self._key(session.id), self._record(session, now), self._record_ttl)
            self._write(self._seen_key(session.id), now, self._seen_ttl)

    def get(self, session_id: str) -> Session | None:
        now = self.clock()
        key, seen_key = self._key(session_id), self._seen_key(session_id)
        with self._guard():
            raw, seen = self.cache.get_many(key, seen_key)
            if raw is None:
                return None
            if seen is None or now - float(seen) > self.timeout:
                self.cache.delete_many(key, seen_key)
                return None
            stored = json.loads(raw)
            self._write(seen_key, now, self._seen_ttl)
            session = Session.from_dict(stored["session"])
            if now - float(stored["stored_at"]) > self.timeout / 2:
                # Keep the record alive as long as the idle timer (see module docstring).
                self._write(key, self._record(session, now), self._record_ttl)
        session.last_seen = now
        return session

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        return self.get(session_id) is not None

    def save(self, session: Session) -> None:
        """Replace the record; an expired or deleted session stays gone."""
        now = self.clock()
        with self._guard():
            seen = self.cache.get(self._seen_key(session.id))
            if seen is None or now - float(seen) > self.timeout:
                return
            self._write(self._key(session.id), self._record(session, now), self._record_ttl)

    def delete(self, session_id: str) -> bool:
        key = self._key(session_id)
        with self._guard():
            existed = self.cache.get(key) is not None
            self.cache.delete_many(key, self._seen_key(session_id))
        return existed

    def count(self) -> StoreCount:
        """Always refused: a cachelib cache has no way to list its keys."""
        raise NotCountable(
            f"the cache {type(self.cache).__name__} cannot list its keys, so its sessions cannot be counted; "
            "they expire on their own (MCP_SESSION_TIMEOUT, or sooner when the cache evicts them)"
        )

    def prune(self) -> int:
        """Always refused: expired sessions are the cache's to drop (it does so itself)."""
        raise NotCountable(
            f"the cache {type(self.cache).__name__} cannot list its keys, so expired sessions cannot be "
            "pruned from here; the cache drops them itself"
        )

    def _key(self, session_id: str) -> str:
        return self.key_prefix + session_id

    def _seen_key(self, session_id: str) -> str:
        return self.key_prefix + session_id + ":seen"

    @staticmethod
    def _record(session: Session, now: float) -> str:
        # A JSON string, whatever serializer the cache uses for its own values.
        return json.dumps({"session": session.to_dict(), "stored_at": now})

    def _write(self, key: str, value: Any, ttl: int) -> None:
        if self.cache.set(key, value, timeout=ttl) is False:
            raise BackendUnavailable(f"the cache {type(self.cache).__name__} refused to store a session")

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except self._errors as exc:
            raise BackendUnavailable(f"the cache {type(self.cache).__name__} is unavailable: {exc}") from exc
