"""Live answers for requests that may stream: the request runs in a thread of
its own while the response relays what it emits.

The answer is plain JSON when the result comes first; it becomes an event
stream as soon as a message (progress, a log line, a request to the client)
must precede the result. Idle streams get heartbeat comments, and every
``probe`` seconds their client's connection is looked at (:mod:`.peer`), so a
client that went away frees the stream's thread within about a second: for a
2026-07-28 request that is a cancellation.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from flask import Response, copy_current_request_context, request

from ..auth import login
from ..protocol import jsonrpc
from ..protocol.bus import EVENTS_CHANNEL, MessageBus
from ..protocol.errors import InternalError
from ..protocol.events import EventLog, Resume, SentProgress, StreamRecorder, event_id, follow, is_progress
from ..protocol.session import StoreUnavailable
from ..protocol.subscriptions import Listen
from ..protocol.transport import Deferred, DurableCall, Reply, store_unavailable
from . import sse
from .draining import draining
from .peer import Peer

if TYPE_CHECKING:
    from ..telemetry.gauges import OpenStreams

logger = logging.getLogger("flask_mcp")

EVENT_STREAM = "text/event-stream"
JSON = "application/json"


@dataclass(frozen=True, slots=True)
class _Message:
    """A message that precedes the result; ``event_id`` on a resumable stream."""

    message: dict[str, Any]
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class _Done:
    """The deferred request finished; ``reply`` is ``None`` when it was cancelled."""

    reply: Reply | None
    event_id: str | None = None


@dataclass(frozen=True, slots=True)
class _LetGo:
    """The request asked to let the connection go (it goes on; the client resumes)."""

    retry_ms: int


@dataclass(frozen=True, slots=True)
class StreamOptions:
    """How the HTTP layer streams: heartbeat period, how often an idle stream
    looks for its client, and for resumable streams the client's reconnection
    delay and when a long connection is let go."""

    heartbeat: float
    retry_ms: int = 1000
    poll_after: float | None = None
    probe: float = 0.5


class _Idle:
    """What an idle stream does at each of its wake-ups (every ``probe``
    seconds): a heartbeat comment when one is due; otherwise a look at the
    client's connection, or, where the connection cannot be looked at, a short
    comment (a write is how a WSGI app learns the client left)."""

    __slots__ = ("peer", "heartbeat", "probe", "_last_write", "_last_tick")

    def __init__(self, peer: Peer | None, heartbeat: float, probe: float) -> None:
        self.peer = peer
        self.heartbeat = heartbeat
        self.probe = min(probe, heartbeat)
        self._last_write = self._last_tick = time.monotonic()

    def wrote(self) -> None:
        self._last_write = time.monotonic()

    def due(self) -> bool:
        """Whether a wake-up's work is due although the stream was not idle
        (it received things it did not send on)."""
        return time.monotonic() - self._last_tick >= self.probe

    def tick(self) -> bytes | None:
        """The bytes to write now (``b""``: none), or ``None`` when the client is gone."""
        now = self._last_tick = time.monotonic()
        if now - self._last_write >= self.heartbeat - 0.001:
            self._last_write = now
            return sse.comment("keep-alive")
        if self.peer is not None and self.peer.observable:
            return None if self.peer.gone() else b""
        self._last_write = now
        return sse.comment()


_Item = _Message | _Done | _LetGo


def respond(
    deferred: Deferred,
    *,
    live: bool,
    options: StreamOptions,
    render: Callable[[Reply], Response],
    recorder: StreamRecorder | None = None,
    streams: OpenStreams | None = None,
) -> Response:
    """Run a deferred request and answer it: JSON, or an event stream once a
    message must precede the result. Without ``live`` (a client that takes no
    event stream) it runs here and nothing precedes the result. With a
    ``recorder`` (a 2025-11-25 session) the stream is primed, its events carry
    ids and are kept, so the client can resume it after a dropped connection.
    ``streams`` counts the event stream while it is open."""
    if not live:
        return render(deferred(None, _never, None) or _cancelled_reply())
    outbox: queue.SimpleQueue[_Item] = queue.SimpleQueue()
    closed = threading.Event()

    ordered = threading.Lock()  # a tool may report from threads of its own: ids stay in stream order

    def emit(message: dict[str, Any]) -> None:
        with ordered:
            outbox.put(_Message(message, recorder.record(message) if recorder is not None else None))

    def let_go(retry_ms: int | None) -> bool:
        if recorder is None or closed.is_set():
            return False
        with ordered:
            recorder.prime()
            outbox.put(_LetGo(options.retry_ms if retry_ms is None else retry_ms))
        return True

    def work() -> None:
        try:
            outcome = deferred(emit, closed.is_set, let_go if recorder is not None else None)
        except BaseException:  # the thread must always report back
            logger.exception("Unexpected failure while serving a streamed request")
            error = InternalError("Internal error while serving the request; see the server log.")
            outcome = Reply(500, jsonrpc.error_message(None, error))
        with ordered:
            final_id = None
            if recorder is not None and recorder.primed:  # the stream was opened: keep its end too
                final_id = recorder.record(outcome.body if outcome is not None else None, final=True)
            outbox.put(_Done(outcome, final_id))

    threading.Thread(target=copy_current_request_context(login.carry(work)), name="flask-mcp-request",
                     daemon=True).start()
    peer = Peer(request.environ)
    first = _first(outbox, peer, options.probe)
    if first is None:  # the client left before anything was sent
        closed.set()
        return _cancelled_reply_response()
    if isinstance(first, _Done):  # nothing came before the result: plain JSON, nothing recorded
        return render(first.reply or _cancelled_reply())
    priming = sse.priming(event_id(recorder.stream_id, 0), options.retry_ms) if recorder is not None else None
    idle = _Idle(peer, options.heartbeat, options.probe)
    response = Response(
        sse.guarded(_relay(first, outbox, closed, options, priming, idle)),
        status=200,
        headers=sse.SSE_HEADERS,
        mimetype=EVENT_STREAM,
    )
    if streams is not None:  # counted while open (flask_mcp.streams.open)
        streams.opened()
        response.call_on_close(streams.closed)
    return response


def _first(outbox: queue.SimpleQueue[_Item], peer: Peer, probe: float) -> _Item | None:
    """The request's first item; ``None`` if its client left first (looked
    at every ``probe`` seconds where the connection can be looked at)."""
    if not peer.observable:
        return outbox.get()
    while True:
        try:
            return outbox.get(timeout=probe)
        except queue.Empty:
            if peer.gone():
                return None


def _cancelled_reply_response() -> Response:
    response = Response(status=_cancelled_reply().status)
    del response.headers["Content-Type"]
    return response


def _relay(
    first: _Item,
    outbox: queue.SimpleQueue[_Item],
    closed: threading.Event,
    options: StreamOptions,
    priming: bytes | None,
    idle: _Idle,
) -> Iterator[bytes]:
    """The event stream: messages as they come, heartbeats while idle, then the
    result. Closing it early (the client left) tells the request. A resumable
    stream (``priming``) may let its connection go after ``poll_after`` seconds."""
    deadline = _deadline(options) if priming is not None else None
    try:
        if priming is not None:
            yield priming
        item: _Item | None = first
        while True:
            if item is None:
                out = idle.tick()
                if out is None:
                    return  # the client left
                if out:
                    yield out
            elif isinstance(item, _Done):
                if item.reply is not None and item.reply.body is not None:
                    yield sse.event(jsonrpc.encode(item.reply.body), event_id=item.event_id)
                return
            elif isinstance(item, _LetGo):
                yield sse.retry(item.retry_ms)
                return
            else:
                yield sse.event(jsonrpc.encode(item.message), event_id=item.event_id)
                idle.wrote()
            if deadline is not None and time.monotonic() >= deadline:
                yield sse.retry(options.retry_ms)  # the rest waits in the event log
                return
            try:
                item = outbox.get(timeout=_wait(idle.probe, deadline))
            except queue.Empty:
                item = None
    finally:
        closed.set()


def _deadline(options: StreamOptions) -> float | None:
    return None if options.poll_after is None else time.monotonic() + options.poll_after


def _wait(period: float, deadline: float | None) -> float:
    """How long to wait for the next item: until the next wake-up, or less before the deadline."""
    if deadline is None:
        return period
    return max(0.0, min(period, deadline - time.monotonic()))


def _never() -> bool:
    return False


def _cancelled_reply() -> Reply:
    """A request cancelled before anything was sent: an empty acceptance."""
    return Reply(202)


def resume(where: Resume, log: EventLog, bus: MessageBus, options: StreamOptions,
           watched: Callable[[int, str | None], None] | None = None) -> Response:
    """A ``GET`` with ``Last-Event-ID``: what the stream still owed, from the
    event log, then its live events (the request may still be running on any
    worker) until its result. ``watched(events relayed, error type)`` is
    called once the stream ends (telemetry's span)."""
    idle = _Idle(Peer(request.environ), options.heartbeat, options.probe)
    report = _Report(watched) if watched is not None else None
    stream = _followed(where, log, bus, options, idle, report=report)
    response = Response(sse.guarded(stream), status=200, headers=sse.SSE_HEADERS, mimetype=EVENT_STREAM)
    if report is not None:  # also when the response is closed before the stream began
        response.call_on_close(report)
    return response


class _Report:
    """Tells ``watched`` (telemetry's span) once how a followed stream went:
    how many events it relayed, and an error type if it was cut."""

    def __init__(self, watched: Callable[[int, str | None], None]) -> None:
        self.watched: Callable[[int, str | None], None] | None = watched
        self.relayed = 0
        self.error_type: str | None = None

    def __call__(self) -> None:
        watched, self.watched = self.watched, None
        if watched is not None:
            watched(self.relayed, self.error_type)


def durable(
    call: DurableCall,
    log: EventLog,
    bus: MessageBus,
    *,
    live: bool,
    options: StreamOptions,
    render: Callable[[Reply], Response],
    streams: OpenStreams | None = None,
) -> Response:
    """A durable call (:mod:`flask_mcp.protocol.durable`), its stream open in
    the event log and the call queued by the core: follow the stream as any
    worker's ``GET`` would. The client leaving does not stop the call
    (``notifications/cancelled`` does); a client that takes no event stream
    gets the answer as JSON."""
    where = call.stream
    if not live:
        return render(_awaited(where, log, bus, options))
    idle = _Idle(Peer(request.environ), options.heartbeat, options.probe)
    priming = sse.priming(event_id(where.stream_id, 0), options.retry_ms)
    response = Response(sse.guarded(_followed(where, log, bus, options, idle, priming)), status=200,
                        headers=sse.SSE_HEADERS, mimetype=EVENT_STREAM)
    if streams is not None:
        streams.opened()
        response.call_on_close(streams.closed)
    return response


def _awaited(where: Resume, log: EventLog, bus: MessageBus, options: StreamOptions) -> Reply:
    """A durable call's answer, waited for here (a client that takes only JSON)."""
    answer: Any = None
    try:
        for item in follow(log, bus, where, idle=options.probe):
            if item is not None:
                answer = item[1]
    except StoreUnavailable as exc:
        return store_unavailable(exc)
    if isinstance(answer, dict) and ("result" in answer or "error" in answer):
        return Reply(200, answer)
    return _cancelled_reply()


def _followed(
    where: Resume, log: EventLog, bus: MessageBus, options: StreamOptions, idle: _Idle, priming: bytes | None = None,
    *, report: _Report | None = None,
) -> Iterator[bytes]:
    """A stream kept in the event log, replayed after ``where`` and followed
    live until its end. Let go with a ``retry`` hint (the client resumes, on
    any worker) after ``poll_after`` seconds, when the store fails, and at once
    when this worker shuts down (:mod:`.draining`)."""
    events = follow(log, bus, where, idle=idle.probe)
    deadline = _deadline(options)
    resumed = priming is None
    if priming is None:
        # A resumed stream opens with the id it resumes from: a client that keeps its
        # resumption token per connection (the TypeScript SDK) still has one if this
        # connection ends before the next event (let go, or its worker killed).
        priming = sse.priming(event_id(where.stream_id, where.after), options.retry_ms)
    sent = SentProgress(log, where.stream)
    seen = sent.seen_before(where.after) if resumed else -1  # progress a stale resumption got already
    try:
        yield priming
        idle.wrote()
        for item in events:
            if item is None:
                if draining():
                    yield sse.retry(options.retry_ms)
                    return
                out = idle.tick()
                if out is None:
                    return  # the client left
                if out:
                    yield out
            else:
                seq = int(item[0].rsplit("/", 1)[1])
                progress = is_progress(item[1])
                if not (progress and seq <= seen):
                    yield sse.event(jsonrpc.encode(item[1]), event_id=item[0])
                    idle.wrote()
                    if report is not None:
                        report.relayed += 1
                    if progress:
                        sent.mark(seq)  # the server took the event: it is on its way
            if draining() or (deadline is not None and time.monotonic() >= deadline):
                yield sse.retry(options.retry_ms)  # the rest waits in the event log
                return
    except StoreUnavailable as exc:  # the client comes back after ``retry``
        logger.warning("Stream %s interrupted: %s", where.stream_id, exc)
        if report is not None:
            report.error_type = "store_unavailable"
        yield sse.retry(options.retry_ms)
    finally:
        events.close()
        if report is not None:
            report()


def listen(subscription: Listen, bus: MessageBus, options: StreamOptions) -> Response:
    """A ``subscriptions/listen`` stream: the acknowledgement, then the change
    notifications it asked for, published by any worker, until the client
    leaves (noticed within ``options.probe`` seconds)."""
    # Subscribe before answering, so nothing published after the ack is missed.
    events = bus.subscribe([EVENTS_CHANNEL])
    idle = _Idle(Peer(request.environ), options.heartbeat, options.probe)

    def stream() -> Iterator[bytes]:
        try:
            yield sse.event(jsonrpc.encode(subscription.acknowledgement()))
            idle.wrote()
            while True:
                item = events.get(idle.probe)
                notification = None if item is None else subscription.notification_for(item[1])
                if notification is not None:
                    yield sse.event(jsonrpc.encode(notification))
                    idle.wrote()
                elif item is None or idle.due():  # idle, or busy with events for other streams
                    out = idle.tick()
                    if out is None:
                        return  # the client left
                    if out:
                        yield out
        except StoreUnavailable as exc:  # the bus broke (every stream of this worker hears it): listen again
            logger.warning("Listen stream %s ended: %s", subscription.subscription_id, exc)
            error = InternalError("The message bus is unavailable for now; send subscriptions/listen again shortly.")
            yield sse.event(jsonrpc.encode(jsonrpc.error_message(subscription.subscription_id, error)))
        finally:
            events.close()

    return Response(
        sse.guarded(stream(), subscription.subscription_id), status=200, headers=sse.SSE_HEADERS, mimetype=EVENT_STREAM
    )
