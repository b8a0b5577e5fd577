"""Durable calls on the 2025 revisions: a legacy session's ``tools/call`` whose
tool opts in runs on a task queue (``MCP_TASK_RUNNER = "celery"``), not in the
web worker that accepted it, and its response stream lives in the event log.

The web worker opens the stream (the priming event, number 0, stored before
anything goes out, with the trace context of the call's span), keeps a record
of the call for operators (:mod:`.durable_records`), hands the call to the
queue with the stream's key (:func:`hand_off`), and then only follows the
log (:func:`.events.follow`), like a ``GET`` with ``Last-Event-ID`` on any
worker does: any window onto the call will do, so a web worker that dies or
restarts costs the client a reconnection, not the call.

The queue worker is the stream's single writer (:class:`DurableWriter`): its
progress, logs and questions to the client are appended to the log and
announced on the bus; the client's answers and ``notifications/cancelled``
reach it through the bus as they reach any worker. A queue worker that dies
leaves the call to another (late acknowledgement): that one continues the
stream after its last stored event, and sends no progress at or below what
the client already saw.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .bus import Message
from .durable_records import DurableRecord, open_record
from .errors import InternalError
from .events import EventLog, Resume, new_stream_id, stream_channel, stream_key
from .jsonrpc import error_message
from .request_info import RequestInfo
from .session import StoreUnavailable
from .task_methods import Tasks
from .task_records import TaskRecord
from .transport import DurableCall, Reply

logger = logging.getLogger("flask_mcp")

#: What a re-run of a tool that is not safe to repeat ends with.
NOT_REPEATED = "The worker running this call stopped, and this tool is not run twice."

#: How long a queue worker keeps trying to append one event while the store is down (seconds).
APPEND_PATIENCE = 30.0

#: Hands a durable call to the queue: ``send(request, stream key, stream id, record)``;
#: the record (``None``: none kept) names the id the queue message gets (``queue_id``).
SendDurable = Callable[[RequestInfo, str, str, TaskRecord | None], None]


def hand_off(log: EventLog, send: SendDurable, tasks: Tasks | None, request: RequestInfo) -> Reply:
    """The web worker's part of a durable call: open its stream in the event log
    (the priming event keeps the call's trace context, ``request.carried``, for
    the spans of its queue worker and of ``GET``s resuming it), keep its record
    and queue it. A store fault propagates (503); a queue that cannot take
    the call ends the stream at once and answers 503 with ``Retry-After``."""
    assert request.session is not None
    stream_id = new_stream_id()
    key = stream_key(request.session.id, stream_id)
    priming: dict[str, Any] = {"message": None, "final": False}
    carried = request.carried_now()
    if carried:
        priming["trace"] = carried
    log.append(key, 0, priming)
    record = open_record(tasks, request, stream_id) if tasks is not None else None
    try:
        send(request, key, stream_id, record)
    except Exception as exc:  # noqa: BLE001 - the queue is down or not set up: 503, the client retries
        logger.error("Could not queue a durable call: %s", exc)
        with contextlib.suppress(StoreUnavailable):  # a GET that resumes it ends at once
            log.append(key, 1, {"message": None, "final": True})
        if record is not None and tasks is not None:
            DurableRecord(tasks.store, record.task_id, clock=tasks.clock).ended("not_queued")
        error = InternalError("The task queue is unavailable; try again later.")
        return Reply(503, error_message(request.request_id, error), {"Retry-After": "1"})
    return Reply(200, durable=DurableCall(request.request_id, Resume(key, stream_id, 0)))


class DurableWriter:
    """The queue worker's side of a durable call's stream: appends after what
    the log holds (a re-run continues a dead worker's stream), keeps it alive
    while the tool is quiet (its retention runs from the last event), and
    drops progress that would not increase."""

    def __init__(
        self,
        log: EventLog,
        key: str,
        notify: Callable[[str, Message], None] | None,
        *,
        keep_alive: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.key = key
        self._notify = notify
        self._lock = threading.Lock()
        self._clock = clock
        self.keep_alive = keep_alive
        events = self._read_all()
        self.next = events[-1][0] + 1 if events else 0
        #: Whether an earlier run reached the end (its acknowledgement was lost).
        self.ended = any(event.get("final") for _, event in events)
        #: How many runs began before this one (the markers they left).
        self.runs_before = sum(1 for _, event in events if "run" in event)
        #: The highest progress the client saw, per progress token.
        self._progress: dict[Any, float] = {}
        for _, event in events:
            self._note_progress(event.get("message"))
        self._last = clock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    def _read_all(self) -> list[tuple[int, dict[str, Any]]]:
        events: list[tuple[int, dict[str, Any]]] | None = self._retry(lambda: self.log.read(self.key, -1))
        if events is None:  # expired: nobody follows any more; the call still runs to its end
            return []
        return events

    def begin(self) -> None:
        """Mark this run in the log and keep the stream alive while it runs."""
        self._append({"message": None, "final": False, "run": self.runs_before + 1})
        if self.keep_alive > 0:
            self._ticker = threading.Thread(target=self._tick, name="flask-mcp-durable-keepalive", daemon=True)
            self._ticker.start()

    def emit(self, message: dict[str, Any]) -> None:
        """One message of the call (progress, a log line, a request to the client)."""
        if not self._fresh_progress(message):
            return
        self._append({"message": message, "final": False})

    def finish(self, message: dict[str, Any] | None) -> None:
        """The call's end: its answer, or ``None`` when it was cancelled."""
        self._stop.set()
        self._append({"message": message, "final": True})

    def _fresh_progress(self, message: dict[str, Any]) -> bool:
        if message.get("method") != "notifications/progress":
            return True
        params = message.get("params") or {}
        token, progress = params.get("progressToken"), params.get("progress")
        if not isinstance(progress, (int, float)):
            return True
        with self._lock:
            seen = self._progress.get(token)
            if seen is not None and progress <= seen:
                return False  # the client saw it (or more) from an earlier run
            self._progress[token] = progress
        return True

    def _note_progress(self, message: Any) -> None:
        if isinstance(message, dict) and message.get("method") == "notifications/progress":
            params = message.get("params") or {}
            progress = params.get("progress")
            if isinstance(progress, (int, float)):
                token = params.get("progressToken")
                self._progress[token] = max(progress, self._progress.get(token, progress))

    def _append(self, event: dict[str, Any]) -> None:
        with self._lock:
            seq = self.next
            self._retry(lambda: self.log.append(self.key, seq, event))
            self.next = seq + 1
            self._last = self._clock()
            if self._notify is not None:
                try:
                    self._notify(stream_channel(self.key), {"seq": seq})
                except StoreUnavailable as exc:  # followers find it at their next look
                    logger.warning("Durable stream %s: could not announce event %d: %s", self.key, seq, exc)

    def _retry(self, action: Callable[[], Any]) -> Any:
        """``action``, tried again while the store is down (up to :data:`APPEND_PATIENCE`):
        an event given up on would be lost to every follower."""
        deadline = time.monotonic() + APPEND_PATIENCE
        delay = 0.1
        while True:
            try:
                return action()
            except StoreUnavailable as exc:
                if time.monotonic() >= deadline:
                    raise
                logger.warning("Durable stream %s: store unavailable, trying again: %s", self.key, exc)
                time.sleep(delay)
                delay = min(delay * 2, 2.0)

    def _tick(self) -> None:
        while not self._stop.wait(self.keep_alive / 4):
            if self._clock() - self._last >= self.keep_alive:
                try:
                    self._append({"message": None, "final": False})
                except StoreUnavailable:
                    logger.warning("Durable stream %s: could not keep it alive", self.key)


def run_durable(
    answer: Callable[[RequestInfo], Any],
    request: RequestInfo,
    writer: DurableWriter,
    *,
    repeatable: bool = True,
    record: DurableRecord | None = None,
) -> str:
    """The queue worker's part: run the call with its messages going to the
    stream, then append its answer (the final event). ``answer(request)``
    returns the JSON-RPC answer, or ``None`` when the call was cancelled.
    Returns how it went: ``ended`` (already, by an earlier run), ``refused``,
    ``cancelled`` or ``completed``. ``record``: the call's record, kept up to date."""
    outcome = _run(answer, request, writer, repeatable, record)
    if record is not None:
        record.ended(outcome)
    return outcome


def _run(answer: Callable[[RequestInfo], Any], request: RequestInfo, writer: DurableWriter, repeatable: bool,
         record: DurableRecord | None) -> str:
    if writer.ended:
        return "ended"
    writer.begin()
    if record is not None:
        record.began()
    if writer.runs_before and not repeatable:
        writer.finish(error_message(request.request_id, InternalError(NOT_REPEATED)))
        return "refused"
    emit = writer.emit if record is None else _noting(writer.emit, record)
    job = replace(request, emit=emit, streaming=True)
    body = None
    try:
        body = answer(job)
    except Exception:
        if record is not None:
            record.ended("failed")
        raise
    finally:
        writer.finish(body)
    return "cancelled" if body is None else "completed"


def _noting(emit: Callable[[dict[str, Any]], None], record: DurableRecord) -> Callable[[dict[str, Any]], None]:
    """``emit``, telling the record of progress too."""

    def emit_and_note(message: dict[str, Any]) -> None:
        emit(message)
        record.saw(message)

    return emit_and_note
