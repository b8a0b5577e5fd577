"""What operators see of durable calls (``flask mcp sessions``): one task record
per call, made by the web worker as it hands the call to the queue and kept up
to date by the queue worker running it (runs, the latest progress message, the
end), so that ``unfinished()`` lists the call while it runs, drops it when it
ends, and the store expires it like any task record.

Such a record is no MCP task (a 2025 client never asked for one): it is marked
``durable`` and ``tasks/*`` requests know no such id. Keeping it never fails
the call: a store fault costs the listing, with a warning.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

from .request_info import RequestInfo
from .session import StoreUnavailable
from .task_handle import settle
from .task_methods import Tasks
from .task_records import CANCELLED, COMPLETED, FAILED, WORKING, TaskRecord, TaskStore

logger = logging.getLogger("flask_mcp")

#: At most one progress message per this many seconds reaches the record (a store write each).
PROGRESS_INTERVAL = 1.0

#: How a run ended (:func:`.durable.run_durable`'s outcomes) -> the record's status and message.
_ENDINGS = {
    "completed": (COMPLETED, None),
    "ended": (COMPLETED, "An earlier run ended it."),
    "cancelled": (CANCELLED, "Cancelled by the client."),
    "refused": (FAILED, "Its worker stopped, and this tool is not run twice."),
    "failed": (FAILED, "The call failed; see the Celery worker's log."),
    "session_gone": (CANCELLED, "Its session ended before it ran."),
    "not_queued": (FAILED, "The task queue is unavailable."),
}


def open_record(tasks: Tasks, request: RequestInfo, stream_id: str) -> TaskRecord | None:
    """The web worker's part: store the record of a call about to be queued
    (``queue_id`` is the id its queue message gets); ``None`` when the store failed."""
    record = tasks.new_record(request.principal)
    name = request.params.get("name")
    record.tool = name if isinstance(name, str) else None
    record.session_id = request.session.id if request.session is not None else None
    record.queued = True
    record.durable = True
    record.stream_id = stream_id
    record.queue_id = str(uuid.uuid4())
    try:
        tasks.store.create(record)
    except StoreUnavailable as exc:
        logger.warning("Durable call %s: no record kept (flask mcp sessions will not list it): %s", stream_id, exc)
        return None
    return record


class DurableRecord:
    """The queue worker's side of a durable call's record."""

    def __init__(self, store: TaskStore, task_id: str, *, clock: Callable[[], float] = time.time,
                 interval: float = PROGRESS_INTERVAL) -> None:
        self.store = store
        self.task_id = task_id
        self.clock = clock
        self.interval = interval
        self._noted = float("-inf")

    def began(self) -> None:
        """A run began here (picked off the queue; above one run: after a worker died)."""

        def begin(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.queued = False
            record.runs += 1
            record.status = WORKING
            record.status_message = None
            record.updated_at = self.clock()
            return True

        self._change(begin)

    def saw(self, message: dict[str, Any]) -> None:
        """One message of the call: a progress notification's text becomes the
        record's status message (at most one write per ``interval`` seconds)."""
        if message.get("method") != "notifications/progress":
            return
        now = self.clock()
        if now - self._noted < self.interval:
            return
        self._noted = now
        text = progress_text(message.get("params"))

        def note(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.status_message = text
            record.updated_at = now
            return True

        self._change(note)

    def ended(self, outcome: str) -> None:
        """The call's end (an outcome of :func:`.durable.run_durable`, or one of :data:`_ENDINGS`)."""
        status, message = _ENDINGS.get(outcome, (COMPLETED, None))
        now = self.clock()

        def end(record: TaskRecord) -> bool:
            record.updated_at = now
            record.queued = False
            return settle(record, status, message)

        self._change(end)

    def _change(self, change: Callable[[TaskRecord], bool]) -> None:
        try:
            self.store.update(self.task_id, change)
        except StoreUnavailable as exc:
            logger.warning("Durable call record %s not updated: %s", self.task_id, exc)


def progress_text(params: Any) -> str | None:
    """What a progress notification says: its message, else ``progress/total``."""
    if not isinstance(params, dict):
        return None
    message = params.get("message")
    if isinstance(message, str) and message:
        return message
    progress, total = params.get("progress"), params.get("total")
    if not isinstance(progress, (int, float)):
        return None
    return f"{progress:g}/{total:g}" if isinstance(total, (int, float)) else f"{progress:g}"
