"""Tasks: the ``io.modelcontextprotocol/tasks`` extension (SEP-2663) on 2026-07-28.

A tool declared with task support answers a ``tools/call`` whose request
declares the extension with a ``CreateTaskResult`` (``resultType: "task"``)
and goes on in a background thread of the worker that accepted it. The task
record lives in the backend's :class:`TaskStore`, so ``tasks/get``,
``tasks/update`` and ``tasks/cancel`` work from any worker: status, result,
error, the questions the tool waits on (``inputRequests``) and the answers
the client sent, and the cancellation flag the tool's ``check_cancelled``
reads. Cancellation is cooperative; records expire ``ttlMs`` after creation.

Sans-IO: the threads are started through a ``spawn`` callable the Flask layer
hands in (it wraps them in the app's context).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from .bus import EVENTS_CHANNEL, MessageBus
from .errors import InternalError, InvalidParams, MCPError, MissingClientCapability
from .input_requests import well_formed
from .request_info import RequestInfo, ToolEntry, ToolOutcome
from .session import StoreUnavailable
from .task_handle import TaskHandle, execute, settle
from .task_records import (
    CANCELLED,
    FAILED,
    INPUT_REQUIRED,
    TASKS_EXTENSION,
    WORKING,
    TaskRecord,
    TaskStore,
    extension_declared,
)

if TYPE_CHECKING:
    from .observe import TaskObserver

logger = logging.getLogger("flask_mcp")

#: What ``@mcp.tool(task=...)`` accepts: may, or must, run as a task.
TASK_SUPPORT = ("optional", "required")
#: When a task tool's task begins: as the call starts, or at ``ctx.start_task()``.
TASK_STARTS = ("call", "explicit")


#: The methods the extension adds (``tasks/result`` and ``tasks/list`` are gone in 2026).
TASK_METHODS = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})


def declares_extension(request: RequestInfo) -> bool:
    return extension_declared(request.client_capabilities)


def task_event(record: TaskRecord) -> dict[str, Any]:
    """The bus message carrying a task's new state (its ``DetailedTask``) to the
    listen streams of its owner that named it (``taskIds``)."""
    return {"type": "task", "task": record.detailed(), "principal": record.principal}


def _missing_extension(what: str) -> MissingClientCapability:
    return MissingClientCapability(
        {"extensions": {TASKS_EXTENSION: {}}},
        f"{what} needs the tasks extension: declare extensions[{TASKS_EXTENSION!r}] in the "
        "request's io.modelcontextprotocol/clientCapabilities.",
    )


class Queue(Protocol):
    """Runs started tasks somewhere else than a thread here
    (``queued_tasks.TaskQueue``, for ``MCP_TASK_RUNNER = "celery"``)."""

    def enqueue(
        self, tasks: Tasks, request: RequestInfo, tool: ToolEntry, arguments: dict[str, Any]
    ) -> ToolOutcome | dict[str, Any]: ...


class Tasks:
    """The tasks extension of one server: the ``tasks/*`` methods and the
    runner that turns a tool call into a task."""

    def __init__(
        self,
        store: TaskStore,
        *,
        spawn: Callable[[Callable[[], None]], Callable[[], bool]],
        ttl_ms: int | None = 3_600_000,
        poll_interval_ms: int | None = 1000,
        clock: Callable[[], float] = time.time,
        check_interval: float = 0.05,
        bus: MessageBus | None = None,
        max_running: int | None = None,
        queue: Queue | None = None,
    ) -> None:
        self.store = store
        #: Where started tasks go instead of a thread here (``None``: threads).
        self.queue = queue
        self.spawn = spawn
        #: Carries each change to the listen streams that follow the task (``None``: no push).
        self.bus = bus
        self.ttl_ms = ttl_ms
        self.poll_interval_ms = poll_interval_ms
        self.clock = clock
        #: How often a waiting or cancellable task reads its record (seconds).
        self.check_interval = check_interval
        #: The tasks of this process whose tool is still running.
        self._running: set[TaskHandle] = set()
        self._running_lock = threading.Lock()
        #: How many tools of queued tasks run in this process (a queue worker's).
        self._queued_running = 0
        #: How many task tools may run at once in this process (``None``: no limit),
        #: and how many threads run one now (started tasks or not yet).
        self.max_running = max_running
        self._threads = 0
        #: Watches each task's run in this process (``None``: nobody does).
        self.observer: TaskObserver | None = None

    def running_here(self) -> int:
        """How many task tools run in this process now (an operator gauge):
        in threads, or for a task queue (see :meth:`running_queued`)."""
        return len(self._running) + self._queued_running

    @contextlib.contextmanager
    def running_queued(self) -> Iterator[None]:
        """A queued task's tool runs in this process meanwhile (a queue worker).
        Counted apart from the threads: a queue worker that exits leaves its
        tasks to be run again, so :meth:`abandon_running` must not fail them."""
        with self._running_lock:
            self._queued_running += 1
        try:
            yield
        finally:
            with self._running_lock:
                self._queued_running -= 1

    def table(self) -> dict[str, Callable[[RequestInfo], dict[str, Any]]]:
        return {"tasks/get": self.get, "tasks/update": self.update, "tasks/cancel": self.cancel}

    def change(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Update a task in the store and, when it changed, tell the listen streams
        following it (``notifications/tasks``) through the bus."""
        changed = False

        def tracked(record: TaskRecord) -> bool:
            nonlocal changed
            changed = change(record)
            return changed

        record = self.store.update(task_id, tracked)
        if record is not None and changed and self.bus is not None:
            try:
                self.bus.publish(EVENTS_CHANNEL, task_event(record))
            except StoreUnavailable:
                logger.warning("Could not announce the change of task %s: the bus is unavailable", task_id)
        return record

    # ------------------------------------------------------------------ methods

    def _record(self, request: RequestInfo) -> TaskRecord:
        if not declares_extension(request):
            raise _missing_extension(request.method)
        task_id = request.params.get("taskId")
        if not isinstance(task_id, str):
            raise InvalidParams(f"{request.method} needs params.taskId, the id from a CreateTaskResult.")
        record = self.store.get(task_id)
        # A durable call's record (a 2025 session's call, listed to operators) is no MCP task.
        if record is None or record.principal != request.principal or record.durable:
            raise InvalidParams(f"Unknown task {task_id!r} (never created here, or expired).")
        request.carried = record.carried  # an observer links the call that created the task
        return record

    def get(self, request: RequestInfo) -> dict[str, Any]:
        return self._record(request).detailed()

    def update(self, request: RequestInfo) -> dict[str, Any]:
        record = self._record(request)
        responses = request.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise InvalidParams("tasks/update needs params.inputResponses, answers keyed as in inputRequests.")
        now = self.clock()

        def take(current: TaskRecord) -> bool:
            # Keys that are not outstanding (never asked, answered, superseded) are ignored,
            # and so are malformed answers (the question stays open).
            outstanding = current.input_requests
            answered = [
                k for k, v in responses.items() if k in outstanding and well_formed(outstanding[k].get("method"), v)
            ]
            for key in answered:
                current.answers[key] = responses[key]
                del current.input_requests[key]
            if current.status == INPUT_REQUIRED and not current.input_requests:
                current.status = WORKING
            current.updated_at = now
            return bool(answered)

        self.change(record.task_id, take)
        return {}

    def cancel(self, request: RequestInfo) -> dict[str, Any]:
        """Cooperative: the tool stops at its next ``check_cancelled`` (or question);
        the ack is the same for a task that already ended."""
        record = self._record(request)

        def flag(current: TaskRecord) -> bool:
            if current.terminal or current.cancel_requested:
                return False
            current.cancel_requested = True
            current.updated_at = self.clock()
            if current.queued:  # no worker picked it up yet: it never starts
                return settle(current, CANCELLED, "Cancelled before it started.")
            current.status_message = "Cancellation requested."
            return True

        self.change(record.task_id, flag)
        return {}

    # ------------------------------------------------------------------ tool calls

    def tool_call(
        self,
        request: RequestInfo,
        tool: ToolEntry,
        arguments: dict[str, Any],
        shape: Callable[[ToolOutcome], dict[str, Any]],
    ) -> Callable[[], ToolOutcome | dict[str, Any]]:
        """How to run a call of a task tool: as a task when the request declares
        the extension; an ordinary call when it does not (``-32021`` for a tool
        whose task is required)."""
        if not declares_extension(request):
            if tool.task_support == "required":
                raise _missing_extension(f"Tool {tool.name!r}")
            return lambda: tool.invoke(arguments, request)
        return lambda: self._run(request, tool, arguments, shape)

    def _run(
        self,
        request: RequestInfo,
        tool: ToolEntry,
        arguments: dict[str, Any],
        shape: Callable[[ToolOutcome], dict[str, Any]],
    ) -> ToolOutcome | dict[str, Any]:
        """Start the tool in the background; return once its task exists (the
        ``CreateTaskResult``), or with what it did before starting one (an
        outcome, or the ``InputRequired``/error it raised)."""
        if self.queue is not None:
            return self.queue.enqueue(self, request, tool, arguments)
        handle = TaskHandle(self, request)
        handle.tool = tool.name
        job = replace(request, task=handle, is_cancelled=handle.is_cancelled, emit=handle.emit)
        self._claim_thread()

        def work() -> None:
            try:
                execute(handle, job, tool, arguments, shape)
            finally:
                with self._running_lock:
                    self._threads -= 1

        observer = self.observer
        try:
            alive = self.spawn(work if observer is None else observer.task(handle, tool.name, work))
        except BaseException:
            with self._running_lock:
                self._threads -= 1
            raise
        return handle.wait_for_start(alive)

    def _claim_thread(self) -> None:
        """Count one more task thread, or refuse the call (503, retry later) at the limit."""
        with self._running_lock:
            if self.max_running is not None and self._threads >= self.max_running:
                raise MCPError(
                    f"This server runs {self.max_running} tasks at once already; try again later.",
                    http_status=503,
                    http_headers={"Retry-After": "5"},
                )
            self._threads += 1

    def abandon_running(self, reason: str = "The server process running this task stopped.") -> int:
        """Fail every task whose tool still runs in this process (called as the
        process exits: its threads die with it, and the tasks would otherwise stay
        ``working`` until their TTL). Returns how many were failed."""
        with self._running_lock:
            handles = list(self._running)
        error = InternalError(reason).to_error()
        failed = 0
        for handle in handles:
            try:
                handle.finish(lambda r: settle(r, FAILED, reason, error=error))
                failed += 1
            except StoreUnavailable:
                logger.warning("Could not fail task %s: the store is unavailable", handle.task_id)
        return failed

    def track(self, handle: TaskHandle, running: bool) -> None:
        with self._running_lock:
            if running:
                self._running.add(handle)
            else:
                self._running.discard(handle)

    def new_record(self, principal: str | None) -> TaskRecord:
        now = self.clock()
        return TaskRecord(
            task_id=secrets.token_urlsafe(18),
            principal=principal,
            created_at=now,
            updated_at=now,
            ttl_ms=self.ttl_ms,
            poll_interval_ms=self.poll_interval_ms,
        )

