"""An in-process session store and message bus: one process (threads fine),
nothing shared between gunicorn workers."""

from __future__ import annotations

import copy
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from ..protocol.events import Event
from ..protocol.session import Session
from ..protocol.tasks import TaskRecord
from .base import Message, Subscription


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

    def touch(self, session_id: str) -> bool:
        """Refresh the idle timer without reading; ``False`` if unknown or expired."""
        return self.get(session_id) is not None

    def delete(self, session_id: str) -> bool:
        with self._lock:
            return self._records.pop(session_id, None) is not None

    def __len__(self) -> int:
        return len(self._records)

    def _prune(self, now: float) -> None:
        expired = [k for k, r in self._records.items() if now - float(r["last_seen"]) > self.timeout]  # type: ignore[arg-type]
        for key in expired:
            del self._records[key]


class Hub(Protocol):
    """Whatever delivers to a :class:`MemorySubscription` and must forget it on close."""

    def unsubscribe(self, subscription: MemorySubscription) -> None: ...


class MemorySubscription(Subscription):
    """A queue the bus appends to; a condition variable wakes the reader."""

    #: Oldest messages are dropped past this many unread ones, so a stalled
    #: reader cannot grow memory without bound.
    MAX_PENDING = 10_000

    def __init__(self, bus: Hub, channels: Sequence[str]) -> None:
        self._bus = bus
        self.channels = tuple(dict.fromkeys(channels))
        self._pending: deque[tuple[str, Message]] = deque(maxlen=self.MAX_PENDING)
        self._ready = threading.Condition()
        self._closed = False

    def deliver(self, channel: str, message: Message) -> None:
        with self._ready:
            self._pending.append((channel, message))
            self._ready.notify()

    def get(self, timeout: float) -> tuple[str, Message] | None:
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._ready:
            while not self._pending:
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
    """Task records in a dict (one process); expired ones are dropped as tasks are created."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self._records: dict[str, dict[str, object]] = {}
        self._lock = threading.Lock()

    def create(self, record: TaskRecord) -> None:
        now = self.clock()
        with self._lock:
            self._records = {
                k: r for k, r in self._records.items() if not TaskRecord.from_dict(r).expired(now)
            }
            self._records[record.task_id] = copy.deepcopy(record.to_dict())

    def get(self, task_id: str) -> TaskRecord | None:
        with self._lock:
            return self._read(task_id)

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        with self._lock:
            record = self._read(task_id)
            if record is not None and change(record):
                self._records[task_id] = copy.deepcopy(record.to_dict())
            return record

    def _read(self, task_id: str) -> TaskRecord | None:
        raw = self._records.get(task_id)
        if raw is None:
            return None
        record = TaskRecord.from_dict(copy.deepcopy(raw))
        if record.expired(self.clock()):
            del self._records[task_id]
            return None
        return record
