"""Tasks run by a task queue (``MCP_TASK_RUNNER = "celery"``) instead of a thread
of the web worker that accepted the call.

The web worker runs the tool up to the start of its task (checks, argument
validation, and with ``task_start="explicit"`` whatever comes before
``ctx.start_task()``), stores the record marked ``queued`` and hands it to the
queue through :attr:`Tasks.queue <.task_methods.Tasks.queue>`. A queue worker
then calls :func:`resume`: the tool runs again from the top against that
record (``start`` is then a no-op), with the same ``Context`` API, its progress,
questions and outcome going to the same store. A worker that dies mid-task
leaves the message to another worker (the queue's late acknowledgement); the
record's ``runs`` counts the attempts, so a tool that is not safe to repeat is
failed instead, and a re-run gets the answers the first run already took.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from .errors import InternalError
from .request_info import RequestInfo, ToolEntry, ToolOutcome
from .session import StoreUnavailable
from .task_handle import TaskHandle, execute, settle
from .task_methods import Tasks
from .task_records import CANCELLED, COMPLETED, FAILED, TaskRecord

logger = logging.getLogger("flask_mcp")

#: What a task whose worker died says when its tool may not run twice.
NOT_REPEATED = "The worker running this task stopped, and this tool is not run twice."


class Queued(BaseException):  # noqa: N818 - a signal, not an error: unwinds the tool in the web worker
    """Raised by the web worker's handle once the task is queued: the tool stops
    there (its queue worker runs it) and the request answers ``created``."""

    def __init__(self, created: dict[str, Any]) -> None:
        super().__init__("queued")
        self.created = created


#: Hands a stored task to the queue: ``send(record, request, tool name, arguments)``.
Send = Callable[[TaskRecord, RequestInfo, str, dict[str, Any]], None]


class TaskQueue:
    """Runs task tools through a task queue instead of threads (``Tasks(queue=...)``)."""

    def __init__(self, send: Send) -> None:
        self.send = send

    def enqueue(
        self, tasks: Tasks, request: RequestInfo, tool: ToolEntry, arguments: dict[str, Any]
    ) -> ToolOutcome | dict[str, Any]:
        """The web worker's part of a queued task: the ``CreateTaskResult`` once the
        task is queued, or what the tool did before starting one."""
        handle = QueueingHandle(tasks, request, tool.name, arguments, self.send)
        job = replace(request, task=handle)
        try:
            return tool.invoke(arguments, job)
        except Queued as queued:
            return queued.created


class QueueingHandle(TaskHandle):
    """The task handle of the web worker: starting the task queues it."""

    def __init__(self, tasks: Tasks, request: RequestInfo, tool: str, arguments: dict[str, Any], send: Send) -> None:
        super().__init__(tasks, request)
        self.tool = self.tool_name = tool
        self.arguments = arguments
        self.send = send

    def start(self, status_message: str | None = None) -> None:
        record = self.tasks.new_record(self.request.principal)
        record.status_message = status_message
        record.queued = True
        record.carried = self.request.carried_now()  # the queue worker's task span continues the call's trace
        self.describe(record)
        record.queue_id = str(uuid.uuid4())  # the queue's id for its message, chosen here: no second write
        self.tasks.store.create(record)
        try:
            self.send(record, self.request, self.tool_name, self.arguments)
        except BaseException:
            logger.exception("Could not queue task %s", record.task_id)
            error = InternalError("The task queue is unavailable.").to_error()
            message = "The task queue is unavailable."
            self.tasks.change(record.task_id, lambda r: settle(r, FAILED, message, error=error))
            raise InternalError("The task queue is unavailable; try again later.", http_status=503) from None
        raise Queued({**record.created(), "content": []})


class ResumedHandle(TaskHandle):
    """The task handle of a queue worker: the task exists already. Until the tool
    starts it again (at once, or at ``ctx.start_task()``), the tool replays what
    it did in the web worker: questions asked then are answered from the call
    itself (multi round-trip), as they were there."""

    def __init__(
        self, tasks: Tasks, request: RequestInfo, record: TaskRecord, shape: Callable[[ToolOutcome], dict[str, Any]]
    ) -> None:
        super().__init__(tasks, request)
        self.record = record
        self.resumed = True
        self._begun = False
        self._shape = shape

    @property
    def started(self) -> bool:
        return self._begun

    def start(self, status_message: str | None = None) -> None:
        self._begun = True

    def hand_over(self, value: Any) -> None:
        """The tool ended before starting its task this time: that is still the task's end."""
        self._begun = True
        if isinstance(value, ToolOutcome):
            result = self._shape(value)
            self.finish(lambda r: settle(r, COMPLETED, None, result=result))
        else:
            message = "The tool ended differently on the task's worker; see the server log."
            logger.error("Task %s: %s (%r)", self.task_id, message, value)
            error = InternalError(message).to_error()
            self.finish(lambda r: settle(r, FAILED, message, error=error))


def resume(
    tasks: Tasks,
    task_id: str,
    request: RequestInfo,
    tool: ToolEntry,
    arguments: dict[str, Any],
    shape: Callable[[ToolOutcome], dict[str, Any]],
    *,
    repeatable: bool = True,
) -> str | None:
    """The queue worker's part: run the tool for the queued task ``task_id``.
    Returns the status it ended with (``failed`` for a re-run refused), or ``None``
    when there was nothing to run (unknown, expired or already ended, e.g.
    cancelled while queued)."""
    first = refused = False

    def begin(record: TaskRecord) -> bool:
        nonlocal first, refused
        refused = False
        if record.terminal:
            return False
        if record.cancel_requested:
            return settle(record, CANCELLED, "Cancelled before it started.")
        first = record.runs == 0
        record.runs += 1
        record.queued = False
        record.updated_at = tasks.clock()
        if not first and not repeatable:
            refused = True
            return settle(record, FAILED, NOT_REPEATED, error=InternalError(NOT_REPEATED).to_error())
        return True

    record = tasks.change(task_id, begin)
    if record is None or record.terminal:
        return FAILED if refused else None
    handle = ResumedHandle(tasks, request, record, shape)
    handle.replaying = not first
    job = replace(request, task=handle, is_cancelled=handle.is_cancelled, emit=handle.emit)

    def work() -> None:
        execute(handle, job, tool, arguments, shape)

    observer = tasks.observer
    with tasks.running_queued():
        # The message's trace context (the web worker's span); the record's for a message queued without it.
        carried = request.carried_now() or record.carried
        (work if observer is None else observer.task(handle, tool.name, work, carried))()
    try:
        final = tasks.store.get(task_id)
    except StoreUnavailable:
        return None
    return final.status if final is not None else None
