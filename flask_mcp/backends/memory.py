"""An in-process session store and message bus: one process (threads fine),
nothing shared between gunicorn workers."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from ..protocol.task_records import TERMINAL, unfinished_first
from .contracts import (
    Backend,
    BackendOptions,
    BackendUnavailable,
    Event,
    Message,
    Session,
    StoreCount,
    Subscription,
    TaskRecord,
)

#: Immutable JSON scalars, which a copy can share.
_SCALARS = frozenset({str, int, float, bool, type(None)})


def _copy(value: Any, memo: dict[int, Any] | None = None) -> Any:
    """What ``copy.deepcopy(value)`` returns, about three times faster for a
    session record: plain dicts and lists are rebuilt here and scalars shared;
    anything else goes to ``deepcopy`` with the same memo, so app objects,
    shared references and cycles come out exactly as ``deepcopy`` makes them."""
    cls = type(value)
    if cls in _SCALARS:
        return value
    if memo is None:
        memo = {}
    elif id(value) in memo:
        return memo[id(value)]
    if cls is dict:
        copied: dict[Any, Any] = {}
        memo[id(value)] = copied
        for key, item in value.items():
            if type(key) is not str:
                key = copy.deepcopy(key, memo)
            copied[key] = item if type(item) in _SCALARS else _copy(item, memo)
        return copied
    if cls is list:
        items: list[Any] = []
        memo[id(value)] = items
        items.extend(item if type(item) in _SCALARS else _copy(item, memo) for item in value)
        return items
    return copy.deepcopy(value, memo)


class MemorySessionStore:
    """Sessions in a dict guarded by a lock, expiring after ``timeout`` idle
    seconds. The dict is kept in idle order (a refresh moves the session to
    the end), so expired sessions are found at its start without a scan.
    At most ``max_sessions`` are kept: a client that opens sessions and never
    uses them again would otherwise grow the process for ``timeout`` seconds;
    past the bound the longest idle one goes (its client gets 404 and starts
    a new session, as after an expiry)."""

    #: About 1 kB each (bench/sessions.py), plus what clients declared (at most
    #: ``MCP_MAX_CLIENT_INFO_BYTES`` each).
    MAX_SESSIONS = 10_000

    def __init__(
        self,
        timeout: float = 3600.0,
        clock: Callable[[], float] = time.time,
        prune_interval: float = 60.0,
        max_sessions: int = MAX_SESSIONS,
    ) -> None:
        self.timeout = timeout
        self.clock = clock
        self.prune_interval = prune_interval
        self.max_sessions = max_sessions
        self._records: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._lock = threading.Lock()
        self._last_prune: float | None = None

    def create(self, session: Session) -> None:
        now = self.clock()
        session.created_at = session.last_seen = now
        record = _copy(session.to_dict())
        with self._lock:
            records = self._records
            records[session.id] = record
            records.move_to_end(session.id)  # a replaced id keeps its old place otherwise
            self._maybe_prune(now)
            while len(records) > self.max_sessions:
                records.popitem(last=False)  # the longest idle

    def get(self, session_id: str) -> Session | None:
        now = self.clock()
        with self._lock:
            record = self._refresh(session_id, now)
            # A copy, so a caller's changes only count once saved.
            return None if record is None else Session.from_dict(_copy(record))

    def save(self, session: Session) -> None:
        """Replace the record, keeping its idle timer (and so its place in idle
        order); an expired or deleted session stays gone."""
        record = _copy(session.to_dict())
        now = self.clock()
        with self._lock:
            stored = self._records.get(session.id)
            if stored is None:
                return
            if now - stored["last_seen"] > self.timeout:
                del self._records[session.id]
                return
            record["last_seen"] = stored["last_seen"]
            self._records[session.id] = record

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        now = self.clock()
        with self._lock:
            return self._refresh(session_id, now) is not None

    def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._records.pop(session_id, None) is not None

    def __len__(self) -> int:
        """Live sessions (for tests and diagnostics: it looks at every one)."""
        now = self.clock()
        with self._lock:
            return sum(1 for record in self._records.values() if now - record["last_seen"] <= self.timeout)

    def count(self) -> StoreCount:
        """Live sessions, and expired ones not yet dropped."""
        now = self.clock()
        with self._lock:
            live = sum(1 for record in self._records.values() if now - record["last_seen"] <= self.timeout)
            return StoreCount(live, len(self._records) - live)

    def prune(self) -> int:
        """Drop every expired session (all of them, not only those at the
        oldest end, as creates do); how many were dropped."""
        now = self.clock()
        with self._lock:
            expired = [sid for sid, record in self._records.items() if now - record["last_seen"] > self.timeout]
            for session_id in expired:
                del self._records[session_id]
        return len(expired)

    def _refresh(self, session_id: str, now: float) -> dict[str, Any] | None:
        """The live record, its idle timer reset and moved to the end (the
        lock held); an expired one is dropped."""
        record = self._records.get(session_id)
        if record is None:
            return None
        if now - record["last_seen"] > self.timeout:
            del self._records[session_id]
            return None
        record["last_seen"] = now
        self._records.move_to_end(session_id)
        return record

    def _maybe_prune(self, now: float) -> None:
        """Prune at most once per ``prune_interval`` (sooner if the clock stepped back)."""
        if self._last_prune is not None and 0 <= now - self._last_prune < self.prune_interval:
            return
        self._last_prune = now
        self._prune(now)

    def _prune(self, now: float) -> None:
        """Drop expired sessions from the oldest end, stopping at the first live
        one: each session is dropped once, so creates pay O(1) amortized. After
        the clock steps back a live session can sit before expired ones; it
        stops the prune early (they go later, or when read), never is dropped."""
        records = self._records
        while records:
            oldest = next(iter(records.values()))
            if now - oldest["last_seen"] <= self.timeout:
                return
            records.popitem(last=False)


class Hub(Protocol):
    """Whatever delivers to a :class:`MemorySubscription` and must forget it on close."""

    def unsubscribe(self, subscription: MemorySubscription) -> None: ...


class MemorySubscription(Subscription):
    """A queue the bus appends to; a condition variable wakes the reader. A bus
    whose delivery can break (a shared Redis or PostgreSQL connection) calls
    :meth:`fail`: what arrived before is read first, then every ``get`` raises
    :class:`BackendUnavailable` (messages may have been missed), and the caller
    subscribes again, which reconnects. The in-process bus never fails."""

    #: Oldest messages are dropped past this many unread ones, so a stalled
    #: reader cannot grow memory without bound.
    MAX_PENDING = 10_000

    def __init__(self, bus: Hub, channels: Sequence[str]) -> None:
        self._bus = bus
        self.channels = tuple(dict.fromkeys(channels))
        self._pending: deque[tuple[str, Message]] = deque(maxlen=self.MAX_PENDING)
        self._ready = threading.Condition()
        self._fault: str | None = None
        self._closed = False

    def deliver(self, channel: str, message: Message) -> None:
        with self._ready:
            self._pending.append((channel, message))
            self._ready.notify()

    def fail(self, reason: str) -> None:
        """The delivering connection broke: wake the reader, which raises once
        its queue is empty (the first reason is kept)."""
        with self._ready:
            if self._fault is None:
                self._fault = reason
            self._ready.notify_all()

    def ready(self) -> bool:
        """Whether :meth:`get` answers at once (no lock: a hint for readers
        that poll often and mostly find nothing)."""
        return bool(self._pending) or self._fault is not None

    def get(self, timeout: float) -> tuple[str, Message] | None:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._ready:
            while not self._pending:
                if self._fault is not None:
                    raise BackendUnavailable(self._fault)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self._closed:
                    return None
                self._ready.wait(remaining)
            return self._pending.popleft()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._bus.unsubscribe(self)
            with self._ready:
                self._ready.notify_all()


class MemoryMessageBus:
    """Publish/subscribe between the threads of one process."""

    def __init__(self) -> None:
        self._subscribers: dict[str, set[MemorySubscription]] = {}
        self._lock = threading.Lock()

    def publish(self, channel: str, message: Message) -> None:
        # A JSON round trip: the same rules (and the same isolation from the
        # publisher's later changes) as backends that cross processes.
        payload = json.dumps(message)
        with self._lock:
            subscribers = list(self._subscribers.get(channel, ()))
        for subscription in subscribers:
            subscription.deliver(channel, json.loads(payload))

    def subscribe(self, channels: Sequence[str]) -> MemorySubscription:
        subscription = MemorySubscription(self, channels)
        with self._lock:
            for channel in subscription.channels:
                self._subscribers.setdefault(channel, set()).add(subscription)
        return subscription

    def unsubscribe(self, subscription: MemorySubscription) -> None:
        with self._lock:
            for channel in subscription.channels:
                subscribers = self._subscribers.get(channel)
                if subscribers is not None:
                    subscribers.discard(subscription)
                    if not subscribers:
                        del self._subscribers[channel]


class MemoryEventLog:
    """Resumable streams' events in a dict (one process); a stream is
    forgotten ``retention`` seconds after its last event."""

    def __init__(self, retention: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.retention = retention
        self.clock = clock
        self._streams: dict[str, tuple[float, list[tuple[int, Event]]]] = {}
        self._lock = threading.Lock()

    def append(self, stream: str, seq: int, event: Event) -> None:
        now = self.clock()
        copied = json.loads(json.dumps(event))  # isolated from the caller, like a real store
        with self._lock:
            if seq == 0:  # a new stream: forget the expired ones
                self._streams = {k: v for k, v in self._streams.items() if now - v[0] <= self.retention}
            events = self._streams.get(stream, (now, []))[1]
            events.append((seq, copied))
            self._streams[stream] = (now, events)

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        with self._lock:
            entry = self._streams.get(stream)
            if entry is None or self.clock() - entry[0] > self.retention:
                return None
            return [(seq, json.loads(json.dumps(event))) for seq, event in entry[1] if seq > after]


class MemoryTaskStore:
    """Task records in a dict (one process). Expired ones read as gone at
    once, and are dropped at most once per ``prune_interval`` as tasks are
    created (a scan of every task per create made creating O(n))."""

    def __init__(self, clock: Callable[[], float] = time.time, prune_interval: float = 60.0) -> None:
        self.clock = clock
        self.prune_interval = prune_interval
        self._records: dict[str, dict[str, object]] = {}
        #: task id -> when it expires (None: never), so a prune parses no record.
        self._expires: dict[str, float | None] = {}
        self._lock = threading.Lock()
        self._last_prune: float | None = None

    def create(self, record: TaskRecord) -> None:
        now = self.clock()
        stored = _copy(record.to_dict())
        with self._lock:
            if self._last_prune is None or not 0 <= now - self._last_prune < self.prune_interval:
                self._last_prune = now
                for task_id in [t for t, expires in self._expires.items() if expires is not None and now > expires]:
                    self._forget(task_id)
            self._records[record.task_id] = stored
            self._expires[record.task_id] = record.expires_at

    def get(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            return self._read(task_id)

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        with self._lock:
            record = self._read(task_id)
            if record is not None and change(record):
                self._records[task_id] = _copy(record.to_dict())
                self._expires[task_id] = record.expires_at
            return record

    def count(self) -> StoreCount:
        """Tasks within their TTL, and expired ones not yet dropped."""
        now = self.clock()
        with self._lock:
            expired = sum(1 for expires in self._expires.values() if expires is not None and now > expires)
            return StoreCount(len(self._expires) - expired, expired)

    def count_by_status(self) -> dict[str, int]:
        """Tasks within their TTL, by status (one pass over the dict, no record parsed)."""
        now = self.clock()
        counts: dict[str, int] = {}
        with self._lock:
            for task_id, expires in self._expires.items():
                if expires is None or now <= expires:
                    status = str(self._records[task_id]["status"])
                    counts[status] = counts.get(status, 0) + 1
        return counts

    def unfinished(self, limit: int) -> list[TaskRecord]:
        """Tasks within their TTL that have not ended, oldest first (one pass over the dict)."""
        with self._lock:
            records = [TaskRecord.from_dict(_copy(raw)) for raw in self._records.values()
                       if raw["status"] not in TERMINAL]
        return unfinished_first(records, self.clock(), limit)

    def prune(self) -> int:
        """Drop every expired task; how many were dropped."""
        now = self.clock()
        with self._lock:
            expired = [t for t, expires in self._expires.items() if expires is not None and now > expires]
            for task_id in expired:
                self._forget(task_id)
        return len(expired)

    def _read(self, task_id: str) -> TaskRecord | None:
        raw = self._records.get(task_id)
        if raw is None:
            return None
        record = TaskRecord.from_dict(_copy(raw))
        if record.expired(self.clock()):
            self._forget(task_id)
            return None
        return record

    def _forget(self, task_id: str) -> None:
        del self._records[task_id]
        del self._expires[task_id]


def open_uri(uri: str, options: BackendOptions) -> Backend:
    """``memory://``: everything in this process (registered as the ``memory`` scheme)."""
    if uri.partition("://")[2]:
        raise ValueError(f"MCP_BACKEND {uri!r}: 'memory://' takes no path.")
    return Backend(
        sessions=MemorySessionStore(timeout=options.timeout),
        bus=MemoryMessageBus(),
        events=MemoryEventLog(retention=options.retention),
        tasks=MemoryTaskStore(),
        description="memory://",
    )
