"""Resumable streams (2025-11-25): the event ids a stream carries, the log
its events are kept in, and the request a client sends to pick a broken
stream up again.

A legacy response stream that the client may resume starts with a priming
event (an id and empty data); every later event has an id of the form
``<stream>/<sequence>``, and is also appended to the backend's
:class:`EventLog` under the session, so a ``GET`` with ``Last-Event-ID`` on
any worker can replay what the stream still owed, then follow it live.
"""

from __future__ import annotations

import logging
import re
import secrets
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .bus import Message, MessageBus
from .session import StoreUnavailable

logger = logging.getLogger("flask_mcp")

#: One stored event: ``{"message": <JSON-RPC message or None>, "final": bool}``
#: (``None`` is the priming event, which carries no message; it may also hold
#: ``"trace"``: the trace context of the call that opened the stream).
Event = dict[str, Any]

_EVENT_ID = re.compile(r"^([A-Za-z0-9_-]{8,64})/(\d{1,9})$")


@runtime_checkable
class EventLog(Protocol):
    """The events of resumable streams, kept for a while (backends implement
    it). One writer per stream appends sequence numbers 0, 1, 2, ... in order."""

    def append(self, stream: str, seq: int, event: Event) -> None:
        """Keep ``event`` as number ``seq`` of ``stream`` (refreshing its retention)."""
        ...

    def read(self, stream: str, after: int) -> list[tuple[int, Event]] | None:
        """The events numbered above ``after``, in order; ``None`` when the
        stream is unknown or expired."""
        ...


def new_stream_id() -> str:
    return secrets.token_urlsafe(12)


def stream_key(session_id: str, stream_id: str) -> str:
    """Where a session's stream lives: a stream is only found with the session
    that opened it, so one client can never read another's."""
    return f"{session_id}/{stream_id}"


def stream_channel(key: str) -> str:
    """The bus channel that wakes followers of a stream when it grows."""
    return f"flask-mcp:stream:{key}"


def event_id(stream_id: str, seq: int) -> str:
    """An SSE id: unique across the session, and says which stream it belongs to."""
    return f"{stream_id}/{seq}"


def parse_event_id(value: str) -> tuple[str, int] | None:
    """``(stream id, sequence)`` from a ``Last-Event-ID``; ``None`` if it is not ours."""
    match = _EVENT_ID.match(value.strip())
    if match is None:
        return None
    return match.group(1), int(match.group(2))


@dataclass(frozen=True, slots=True)
class Resume:
    """A ``GET`` that resumes a stream: replay ``stream`` after ``after``."""

    stream: str
    stream_id: str
    after: int


class StreamRecorder:
    """The writing side of one resumable stream: numbers its events and keeps
    them in the log, so the stream survives its connection. Used only by the
    thread that serves the request (the single writer). A backend fault is
    logged once and the stream goes on live, without being resumable."""

    def __init__(self, log: EventLog, session_id: str, notify: Callable[[str, Message], None] | None = None,
                 trace: Callable[[], dict[str, str] | None] | None = None) -> None:
        self.log = log
        #: The current trace context (an observer's), kept in the priming event:
        #: a ``GET`` that resumes the stream continues the call's trace.
        self._trace = trace
        self.stream_id = new_stream_id()
        self.key = stream_key(session_id, self.stream_id)
        self._notify = notify
        self._next = 0
        self._failed = False

    @property
    def primed(self) -> bool:
        return self._next > 0

    def prime(self) -> str:
        """Open the stream (once): the priming event's id."""
        if self._next == 0:
            carried = self._trace() if self._trace is not None else None
            self._append(None, final=False, trace=carried)
        return event_id(self.stream_id, 0)

    def record(self, message: dict[str, Any] | None, *, final: bool = False) -> str:
        """Keep one message of the stream (the final one may be ``None``: the
        request was cancelled); the SSE id it goes out with."""
        self.prime()
        return self._append(message, final=final)

    def _append(self, message: dict[str, Any] | None, *, final: bool, trace: dict[str, str] | None = None) -> str:
        seq = self._next
        self._next = seq + 1
        if not self._failed:
            event: Event = {"message": message, "final": final}
            if trace:
                event["trace"] = trace
            try:
                self.log.append(self.key, seq, event)
                if self._notify is not None:
                    self._notify(stream_channel(self.key), {"seq": seq})
            except StoreUnavailable as exc:
                self._failed = True
                logger.warning("Stream %s is not resumable from event %d on: %s", self.stream_id, seq, exc)
        return event_id(self.stream_id, seq)


def stored_trace(log: EventLog, stream: str) -> dict[str, str] | None:
    """The trace context kept in a stream's priming event (see :class:`StreamRecorder`), if any."""
    events = log.read(stream, -1)
    if not events or events[0][0] != 0:
        return None
    carried = events[0][1].get("trace")
    if isinstance(carried, dict) and all(isinstance(v, str) for v in carried.values()):
        return carried
    return None


def follow(
    log: EventLog, bus: MessageBus, resume: Resume, *, idle: float
) -> Generator[tuple[str, Message] | None, None, None]:
    """The reading side: ``(id, message)`` for every event after the resumed
    one, then live ones as the writer (on any worker) adds them, until the
    final one. ``None`` after ``idle`` quiet seconds (time for a heartbeat).
    Ends early when the stream expires (its writer is gone)."""
    cursor = resume.after
    with bus.subscribe([stream_channel(resume.stream)]) as wakeups:
        while True:
            events = log.read(resume.stream, cursor)
            if events is None:
                return
            for seq, event in events:
                cursor = seq
                if event.get("message") is not None:
                    yield event_id(resume.stream_id, seq), event["message"]
                if event.get("final"):
                    return
            if events:
                continue
            if wakeups.get(idle) is None:
                yield None
            while wakeups.get(0) is not None:  # one read serves every pending wake-up
                pass


class SentProgress:
    """How far a stream's progress notifications were handed to a connection,
    on any worker: kept beside the stream in the event log (``<stream>#sent``,
    one entry per progress event sent). A resumption from an older id does not
    send that progress again: a client that resumes with a stale ``Last-Event-ID``
    (the official Python SDK, after a resumed stream was cut) would otherwise see
    it twice. Only progress is skipped; every other message is sent again."""

    def __init__(self, log: EventLog, stream: str) -> None:
        self.log = log
        self.key = stream + "#sent"
        self._opened = False

    def load(self) -> int:
        """The highest sequence number of a progress event sent (``-1``: none)."""
        try:
            entries = self.log.read(self.key, -1)
        except StoreUnavailable:
            return -1
        return max((seq for seq, _ in entries), default=-1) if entries else -1

    def mark(self, seq: int) -> None:
        """Progress event ``seq`` was handed to a connection."""
        try:
            if not self._opened:  # number 0 holds a log's retention (SQLite): every writer may add it
                self.log.append(self.key, 0, {"message": None, "final": False})
                self._opened = True
            self.log.append(self.key, seq, {"message": None, "final": False})
        except StoreUnavailable:
            pass  # only a duplicate at a later resumption


def is_progress(message: Message) -> bool:
    return message.get("method") == "notifications/progress"
