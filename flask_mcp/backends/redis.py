"""Sessions, stream events and tasks in Redis: many workers on many machines.
Sessions are JSON strings whose server-side TTL is the idle timer; the bus is
Redis PUBLISH/SUBSCRIBE (redis_bus.py). Needs the ``redis`` package
(``pip install flask-mcp[redis]``)."""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections.abc import Callable
from typing import Any

try:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("MCP_BACKEND 'redis://...' needs the redis package: pip install flask-mcp[redis]") from exc

from ..protocol.task_records import unfinished_first
from .contracts import (
    DEFAULT_IO_TIMEOUT,
    Backend,
    BackendOptions,
    BackendUnavailable,
    Event,
    Session,
    StoreCount,
    TaskRecord,
    redact_url,
)
from .redis_bus import DEFAULT_CHANNEL_PREFIX, RedisMessageBus, RedisSubscription
from .redis_direct import DirectWrites
from .redis_faults import UNAVAILABLE, as_unavailable, count_keys, describe_client, key_pattern, unavailable
from .redis_tracking import MISSING, TrackedCache
from .session_records import dump_record_ascii, load_record

__all__ = [
    "DEFAULT_CHANNEL_PREFIX", "DEFAULT_KEY_PREFIX", "DEFAULT_STREAM_PREFIX", "DEFAULT_TASK_PREFIX", "UNAVAILABLE",
    "RedisEventLog", "RedisMessageBus", "RedisSessionStore", "RedisSubscription", "RedisTaskStore",
    "backend_from_client", "backend_from_url", "client_from_url", "open_uri",
]

DEFAULT_KEY_PREFIX = "flask-mcp:session:"
DEFAULT_STREAM_PREFIX = "flask-mcp:stream:"
DEFAULT_TASK_PREFIX = "flask-mcp:task:"


class RedisSessionStore:
    """One key per session, ``SET ... PX timeout``: the key's TTL is the idle timer.

    Each process keeps the records it read and answers a session's next
    requests from that copy, which Redis itself invalidates
    (``redis_tracking.py``): another worker's or host's change or ``DELETE``
    drops the copy as soon as the invalidation arrives (about a millisecond
    on one machine, see docs/redis.md), this process's own at once. The TTL
    is refreshed by a read at most every ``refresh_slack`` seconds, as
    SQLite's ``last_seen`` is; a copy is trusted for at most
    ``cache_max_age`` seconds. No copies where the server refuses tracking."""

    #: Seconds a kept record is served without reading Redis (0: no cache).
    cache_max_age = 1.0
    #: Records kept per process (the oldest is dropped past this).
    cache_size = 4096

    def __init__(
        self,
        client: redis.Redis,
        *,
        timeout: float = 3600.0,
        key_prefix: str = DEFAULT_KEY_PREFIX,
        clock: Callable[[], float] = time.time,
        io_timeout: float = DEFAULT_IO_TIMEOUT,
    ) -> None:
        self.client = client
        self.timeout = timeout
        self.key_prefix = key_prefix
        self.clock = clock
        self._ttl_ms = max(1, round(timeout * 1000))
        self._where = describe_client(client)
        #: Whether the server knows ``GETEX`` (until it says otherwise).
        self._getex = True
        #: How stale the TTL may get before a read refreshes it.
        self.refresh_slack = min(60.0, timeout / 10)
        #: session id -> when this process last refreshed its TTL.
        self._refreshed: dict[str, float] = {}
        self._copies = self._tracked_cache(client, io_timeout)
        #: ``initialize``'s ``SET`` on a short path (redis_direct.py).
        self._writes = DirectWrites(client)

    def _tracked_cache(self, client: redis.Redis, io_timeout: float) -> TrackedCache:
        """This process's copies (a cluster keeps them per node: redis_cluster_tracking.py)."""
        return TrackedCache(client.connection_pool, size=self.cache_size, io_timeout=io_timeout)

    def create(self, session: Session) -> None:
        """One ``SET ... PX`` and no read-back: the key's TTL is the idle timer."""
        self.begin_create(session)()

    def begin_create(self, session: Session) -> Callable[[], None]:
        """Send the new session's ``SET`` now; the function returned waits for
        Redis to take it (raising :class:`BackendUnavailable`) and must be
        called before the session id is given to anyone. The server builds
        ``initialize``'s answer in between, while the command travels."""
        session.created_at = session.last_seen = now = self.clock()
        key = self._key(session.id)
        try:
            reply = self._writes.begin_set_px(key, dump_record_ascii(session.to_dict()), self._ttl_ms)
        except Exception as exc:
            self._raise_unavailable(exc)
            raise

        def finish() -> None:
            try:
                reply()
            except Exception as exc:
                self._raise_unavailable(exc)
                raise
            self._copies.forget(key)
            self._note_refresh(session.id, now)

        return finish

    def _raise_unavailable(self, exc: Exception) -> None:
        """Raise :class:`BackendUnavailable` when ``exc`` means Redis cannot be
        reached now (``unavailable()``'s mapping, without a generator per request)."""
        fault = as_unavailable(exc, self._where)
        if fault is not None:
            raise fault from exc

    def get(self, session_id: str) -> Session | None:
        """Read the session (from this process's copy when it is current); the
        TTL is refreshed when this process last did so over ``refresh_slack`` ago."""
        now = self.clock()
        key = self._key(session_id)
        refreshed = self._refreshed.get(session_id)
        fresh = refreshed is not None and 0.0 <= now - refreshed <= self.refresh_slack
        copy = self._copies.get(key) if fresh and self.cache_max_age > 0 else None
        if copy is not None and 0.0 <= now - copy[0] <= self.cache_max_age:
            raw = copy[1]
        else:
            with unavailable(self._where):
                if not fresh:
                    raw = self._read_refreshing(key)  # it reports a change to every copy, this one's too
                elif self.cache_max_age <= 0 or (raw := self._copies.read(key, now)) is MISSING:
                    raw = self.client.get(key)
            if raw is None:
                self._refreshed.pop(session_id, None)
                self._copies.forget(key)
                return None
            if not fresh:
                self._note_refresh(session_id, now)
        session = Session.from_dict(load_record(raw))
        session.last_seen = now
        return session

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        now = self.clock()
        with unavailable(self._where):
            alive = bool(self.client.pexpire(self._key(session_id), self._ttl_ms))
        if alive:
            self._note_refresh(session_id, now)
        return alive

    def save(self, session: Session) -> None:
        """Replace the record, keeping its TTL; an expired or deleted session stays gone."""
        key = self._key(session.id)
        try:
            with unavailable(self._where):
                self.client.set(key, json.dumps(session.to_dict()), xx=True, keepttl=True)
        finally:
            self._copies.forget(key)

    def delete(self, session_id: str) -> bool:
        """Gone for this process at once; for the others when Redis's invalidation arrives."""
        key = self._key(session_id)
        self._refreshed.pop(session_id, None)
        try:
            with unavailable(self._where):
                deleted = bool(self.client.delete(key))
        finally:
            self._copies.forget(key)
        return deleted

    def close(self) -> None:
        """Stop this process's invalidation listener; close the write connections."""
        self._copies.close()
        self._writes.close()

    def _note_refresh(self, session_id: str, now: float) -> None:
        refreshed = self._refreshed
        if len(refreshed) >= self.cache_size and session_id not in refreshed:
            try:
                refreshed.pop(next(iter(refreshed)), None)
            except (RuntimeError, StopIteration):  # another thread changed the dict meanwhile
                pass
        refreshed[session_id] = now

    def count(self) -> StoreCount:
        """Live sessions (Redis expires idle ones itself)."""
        return count_keys(self.client, self.key_prefix, self._where)

    def prune(self) -> int:
        """Nothing to do: a session's key expires on the server with its idle timer."""
        return 0

    def _key(self, session_id: str) -> str:
        return self.key_prefix + session_id

    def _read_refreshing(self, key: str) -> Any:
        """The record, its TTL reset: one ``GETEX`` (Redis 6.2+; a third less
        time than the transaction, most of it redis-py's pipeline machinery),
        else ``GET`` and ``PEXPIRE`` in one transaction."""
        if self._getex:
            try:
                return self.client.getex(key, px=self._ttl_ms)
            except redis.exceptions.ResponseError as exc:
                refusal = str(exc).lower()  # servers and proxies word it differently
                if not any(word in refusal for word in ("unknown command", "unsupported", "getex")):
                    raise
                self._getex = False  # an older server, a proxy, or the command renamed away
        pipe = self.client.pipeline(transaction=True)
        pipe.get(key)
        pipe.pexpire(key, self._ttl_ms)
        raw, _ = pipe.execute()
        return raw


class RedisEventLog:
    """Each resumable stream is a list (index = sequence number) whose TTL,
    refreshed by every append, is the retention."""

    def __init__(
        self, client: redis.Redis, *, retention: float = 600.0, key_prefix: str = DEFAULT_STREAM_PREFIX
    ) -> None:
        self.client = client
        self.key_prefix = key_prefix
        self.retention = retention
        self._ttl_ms = max(1, round(retention * 1000))
        self._where = describe_client(client)

    def _key(self, stream: str) -> str:
        return self.key_prefix + stream

    def append(self, stream: str, seq: int, event: Event) -> None:
        key = self._key(stream)
        with unavailable(self._where):
            pipe = self.client.pipeline(transaction=True)
            pipe.rpush(key, json.dumps({"seq": seq, **event}))
            pipe.pexpire(key, self._ttl_ms)
            pipe.execute()

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        key = self._key(stream)
        with unavailable(self._where):
            pipe = self.client.pipeline(transaction=False)
            pipe.exists(key)
            pipe.lrange(key, max(after + 1, 0), -1)
            exists, raw = pipe.execute()
        if not exists:
            return None
        events = [json.loads(item) for item in raw]
        return [(int(event.pop("seq")), event) for event in events if int(event["seq"]) > after]


class RedisTaskStore:
    """One key per task whose Redis TTL is the task's; updates are optimistic
    (WATCH/MULTI, retried when another worker changed the task meanwhile)."""

    def __init__(self, client: redis.Redis, *, key_prefix: str = DEFAULT_TASK_PREFIX, attempts: int = 20) -> None:
        self.client = client
        self.key_prefix = key_prefix
        self.attempts = attempts
        self._where = describe_client(client)

    def create(self, record: TaskRecord) -> None:
        expires = record.expires_at
        with unavailable(self._where):
            self.client.set(
                self.key_prefix + record.task_id,
                json.dumps(record.to_dict()),
                # Rounded down: Redis counts whole milliseconds, so rounding up
                # could keep a task one millisecond past its ttlMs.
                pxat=None if expires is None else max(1, math.floor(expires * 1000)),
            )

    def get(self, task_id: str) -> TaskRecord | None:
        with unavailable(self._where):
            raw = self.client.get(self.key_prefix + task_id)
        return None if raw is None else TaskRecord.from_dict(json.loads(raw))

    def count(self) -> StoreCount:
        """Tasks within their TTL (Redis expires the others itself)."""
        return count_keys(self.client, self.key_prefix, self._where)

    def unfinished(self, limit: int) -> list[TaskRecord]:
        """Tasks that have not ended, oldest first: ``SCAN`` over the prefix (it
        never blocks the server, but walks the whole key space), then the
        records in batches (``MGET``; across slots on a cluster)."""
        pattern = key_pattern(self.key_prefix)
        read = getattr(self.client, "mget_nonatomic", self.client.mget)  # a cluster's keys span slots
        records: list[TaskRecord] = []
        with unavailable(self._where):
            batch: list[Any] = []
            for key in self.client.scan_iter(match=pattern, count=1000):
                batch.append(key)
                if len(batch) == 500:
                    records += _unended(read(batch))
                    batch = []
            if batch:
                records += _unended(read(batch))
        return unfinished_first(records, time.time(), limit)

    def prune(self) -> int:
        """Nothing to do: a task's key expires on the server with its TTL."""
        return 0

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        key = self.key_prefix + task_id
        with unavailable(self._where):
            for attempt in range(self.attempts):
                if attempt:  # another writer won the last round: step aside a random while
                    time.sleep(random.uniform(0, min(0.02, 0.001 * 2**attempt)))
                with self.client.pipeline(transaction=True) as pipe:
                    try:
                        pipe.watch(key)
                        raw = pipe.get(key)
                        if raw is None:
                            return None
                        record = TaskRecord.from_dict(json.loads(raw))
                        if not change(record):
                            return record
                        pipe.multi()
                        pipe.set(key, json.dumps(record.to_dict()), xx=True, keepttl=True)
                        pipe.execute()
                        return record
                    except redis.exceptions.WatchError:
                        continue
        raise BackendUnavailable(f"Redis ({self._where}): task {task_id} kept changing; update not applied")


def _unended(raws: list[Any]) -> list[TaskRecord]:
    """The records among ``raws`` (``None``: expired meanwhile) that have not ended."""
    found = []
    for raw in raws:
        if raw is not None:
            record = TaskRecord.from_dict(json.loads(raw))
            if not record.terminal:
                found.append(record)
    return found


def client_from_url(url: str, *, io_timeout: float = DEFAULT_IO_TIMEOUT) -> redis.Redis:
    """A client whose every call is bounded: socket timeouts of ``io_timeout``
    and one immediate retry, no backoff, only for a connection Redis dropped
    (not for a timeout: a Redis that stops answering must fail in ``io_timeout``)."""
    return redis.Redis.from_url(
        url,
        socket_timeout=io_timeout,
        socket_connect_timeout=io_timeout,
        retry=Retry(NoBackoff(), 1, supported_errors=(redis.exceptions.ConnectionError,)),
        retry_on_timeout=False,
        health_check_interval=30,
    )


def backend_from_client(
    client: redis.Redis, *, timeout: float, io_timeout: float, owned: bool, retention: float = 600.0
) -> Backend:
    """A :class:`Backend` over ``client``; closed by ``Backend.close`` only if ``owned``."""

    def check() -> None:
        with unavailable(describe_client(client)):
            client.ping()

    bus = RedisMessageBus(client, io_timeout=io_timeout)

    sessions = RedisSessionStore(client, timeout=timeout, io_timeout=io_timeout)

    def close() -> None:
        sessions.close()
        bus.close()
        if owned:
            client.close()

    return Backend(
        sessions=sessions,
        bus=bus,
        events=RedisEventLog(client, retention=retention),
        tasks=RedisTaskStore(client),
        description=describe_client(client),
        check=check,
        close=close,
    )


def backend_from_url(url: str, *, timeout: float, io_timeout: float, retention: float = 600.0) -> Backend:
    try:
        client = client_from_url(url, io_timeout=io_timeout)
    except ValueError as exc:
        raise ValueError(f"MCP_BACKEND {redact_url(url)!r} is not a valid Redis URL: {exc}") from exc
    backend = backend_from_client(client, timeout=timeout, io_timeout=io_timeout, owned=True, retention=retention)
    return dataclasses.replace(backend, description=redact_url(url))


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``redis://``, ``rediss://`` and ``redis+unix:///path/to/redis.sock``
    (registered as those three schemes)."""
    scheme, _, rest = uri.partition("://")
    url = "unix://" + rest if scheme.lower() == "redis+unix" else uri
    backend = backend_from_url(url, timeout=options.timeout, io_timeout=options.io_timeout, retention=options.retention)
    return dataclasses.replace(backend, description=redact_url(uri))
