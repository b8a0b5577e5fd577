"""A task's running side: :class:`TaskHandle`, what the tool's ``Context``
talks to while it runs as a task (its status, its questions to the client and
their answers, the cancellation flag, its start and end), and :func:`execute`,
which runs a task tool to its recorded end. Threads and queue workers
(``queued_tasks``) share both."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from .errors import InternalError, MCPError
from .input_requests import InputRequest, InputRequired
from .request_info import InvalidToolArguments, RequestCancelled, RequestInfo, ToolEntry, ToolOutcome
from .session import StoreUnavailable
from .task_records import CANCELLED, COMPLETED, FAILED, INPUT_REQUIRED, TaskRecord, TaskStore

logger = logging.getLogger("flask_mcp")


class TaskBook(Protocol):
    """What a handle needs of the tasks that run it (``task_methods.Tasks``),
    kept as a protocol so that this module does not import that one back."""

    store: TaskStore
    clock: Callable[[], float]
    #: How often a waiting or cancellable task reads its record (seconds).
    check_interval: float

    def new_record(self, principal: str | None) -> TaskRecord: ...

    def change(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None: ...

    def track(self, handle: TaskHandle, running: bool) -> None:
        """Count ``handle`` among this process's running tasks, or stop counting it."""

#: The longest a task waiting for answers goes without reading its record (seconds).
MAX_ANSWER_CHECK_INTERVAL = 0.5

def execute(
    handle: TaskHandle,
    job: RequestInfo,
    tool: ToolEntry,
    arguments: dict[str, Any],
    shape: Callable[[ToolOutcome], dict[str, Any]],
) -> None:
    """Run a task tool and record how it ended (in a task thread, or a queue worker)."""
    try:
        outcome = tool.invoke(arguments, job)  # starts the task once the arguments are valid
    except InvalidToolArguments as exc:
        if not handle.started:
            handle.hand_over(exc)
            return
        failure = shape(ToolOutcome([{"type": "text", "text": exc.message}], is_error=True))
        handle.finish(lambda r: settle(r, COMPLETED, None, result=failure))
    except RequestCancelled as exc:
        handle.end(exc, lambda r: settle(r, CANCELLED, "Cancelled."))
    except MCPError as exc:
        message, error = exc.message, exc.to_error()
        handle.end(exc, lambda r: settle(r, FAILED, message, error=error))
    except InputRequired as exc:  # before the task began: the call's multi round-trip answer
        handle.end(exc, lambda r: settle(r, FAILED, "Internal error.", error=_internal_error()))
    except BaseException as exc:
        if not isinstance(exc, StoreUnavailable):
            logger.exception("Task tool %r failed", tool.name)
        handle.end(exc, lambda r: settle(r, FAILED, "Internal error.", error=_internal_error()))
    else:
        if handle.started:
            result = shape(outcome)
            handle.finish(lambda r: settle(r, COMPLETED, None, result=result))
        else:
            handle.hand_over(outcome)


def settle(record: TaskRecord, status: str, message: str | None, **fields: Any) -> bool:
    """Move a task to a terminal status, unless it already ended."""
    if record.terminal:
        return False
    record.status = status
    record.status_message = message
    record.input_requests = {}
    for name, value in fields.items():
        setattr(record, name, value)
    return True


def _internal_error() -> dict[str, Any]:
    return InternalError("Internal error while running the task; see the server log.").to_error()


class TaskHandle:
    """One call running as a task: hands the request thread its first answer
    (the ``CreateTaskResult``, or what happened before any task began), then
    records the task's progress in the store."""

    def __init__(self, tasks: TaskBook, request: RequestInfo) -> None:
        self.tasks = tasks
        self.request = request
        self.record: TaskRecord | None = None
        #: The record as this run ended it (``None``: not ended here, or never started).
        self.ended: TaskRecord | None = None
        self._handed: list[Any] = []
        self._ready = threading.Event()
        self._last_check = 0.0
        self._cancelled = False
        #: A queue worker's re-run after the first worker died: answers given to the
        #: first run are handed back (keys asked again in the same order).
        self.replaying = False
        #: A queue worker runs this task: checks made when the call was accepted are not repeated.
        self.resumed = False
        #: The tool's name, kept in the record for operators (``flask mcp sessions``).
        self.tool: str | None = None

    def describe(self, record: TaskRecord) -> None:
        """Note in a new record what an operator sees of the call: the tool, the session."""
        record.tool = self.tool
        session = self.request.session
        record.session_id = session.id if session is not None else None

    @property
    def started(self) -> bool:
        return self.record is not None

    @property
    def task_id(self) -> str | None:
        return self.record.task_id if self.record is not None else None

    # ------------------------------------------------------------------ hand-over

    def start(self, status_message: str | None = None) -> None:
        """Create the task (durably: any worker can read it once this returns)
        and let the request answer with it; the call goes on in the background."""
        if self.record is not None:
            return
        record = self.tasks.new_record(self.request.principal)
        record.status_message = status_message
        record.carried = self.request.carried_now()
        self.describe(record)
        self.tasks.store.create(record)
        self.record = record
        self.tasks.track(self, True)
        # The core schema's CallToolResult requires ``content``; an empty list keeps
        # this answer to tools/call valid for clients that check it against that
        # schema (extra members are allowed in a CreateTaskResult).
        self.hand_over({**record.created(), "content": []})

    def hand_over(self, value: Any) -> None:
        self._handed.append(value)
        self._ready.set()

    def wait_for_start(self, alive: Callable[[], bool]) -> ToolOutcome | dict[str, Any]:
        """What the request answers: waits as long as the tool's thread runs."""
        while not self._ready.wait(0.5):
            if not alive() and not self._ready.is_set():
                raise InternalError("The tool's thread ended without an answer; see the server log.")
        value = self._handed[0]
        if isinstance(value, BaseException):
            raise value
        return value  # type: ignore[no-any-return]

    def end(self, exc: BaseException, settle: Callable[[TaskRecord], bool]) -> None:
        """The tool stopped with ``exc``: the task's outcome, or (before any task)
        the request's."""
        if self.started:
            self.finish(settle)
        else:
            self.hand_over(exc)

    def finish(self, settle: Callable[[TaskRecord], bool]) -> None:
        assert self.record is not None
        self.tasks.track(self, False)
        now = self.tasks.clock()

        def change(record: TaskRecord) -> bool:
            record.updated_at = now
            self.ended = record
            return settle(record)

        try:
            self.tasks.change(self.record.task_id, change)
        except StoreUnavailable:
            logger.exception("Could not record the end of task %s", self.record.task_id)

    # ------------------------------------------------------------------ while running

    def emit(self, message: dict[str, Any]) -> None:
        """Notifications reach the client only before the task begins (progress and
        logs are not delivered for tasks)."""
        if not self.started:
            self.request.emit(message)

    def is_cancelled(self) -> bool:
        if not self.started:
            return self.request.is_cancelled()
        if self._cancelled:
            return True
        now = time.monotonic()
        if now - self._last_check >= self.tasks.check_interval:
            self._last_check = now
            record = self.read()
            self._cancelled = record is None or record.cancel_requested
        return self._cancelled

    def read(self) -> TaskRecord | None:
        assert self.record is not None
        try:
            return self.tasks.store.get(self.record.task_id)
        except StoreUnavailable:
            logger.warning("Task store unavailable while task %s runs", self.record.task_id)
            return self.record

    def set_status_message(self, message: str | None) -> None:
        if self.record is None:
            return
        now = self.tasks.clock()

        def change(record: TaskRecord) -> bool:
            if record.terminal:
                return False
            record.status_message = message
            record.updated_at = now
            return True

        self.tasks.change(self.record.task_id, change)

    def ask(self, questions: list[InputRequest]) -> list[Any]:
        """Park the task in ``input_required`` with these questions and wait
        (until cancelled or expired) for ``tasks/update`` to bring every answer,
        from whichever worker it reached."""
        assert self.record is not None
        task_id = self.record.task_id
        asked: dict[str, InputRequest] = {}

        if self.replaying:
            replayed = self._replay(questions)
            if replayed is not None:
                return replayed

        def park(record: TaskRecord) -> bool:
            asked.clear()
            fresh: dict[str, InputRequest] = {}
            for question in questions:
                key, n = question.key, 1
                if self.replaying and (key in record.input_requests or key in record.answers):
                    asked[key] = question  # the first run asked it: wait for that answer
                    continue
                while key in record.asked or key in asked:  # keys are unique over the task's life
                    n += 1
                    key = f"{question.key}-{n}"
                asked[key] = fresh[key] = question
            record.asked.extend(fresh)
            record.input_requests.update({k: q.to_wire() for k, q in fresh.items()})
            if record.input_requests:
                record.status = INPUT_REQUIRED
            record.updated_at = self.tasks.clock()
            return True

        if self.tasks.change(task_id, park) is None:
            raise RequestCancelled()
        keys = list(asked)
        delay = self.tasks.check_interval
        while True:
            record = self.tasks.store.get(task_id)
            if record is None or record.cancel_requested:
                self._cancelled = True
                raise RequestCancelled()
            if all(k in record.answers for k in keys):
                answers = [record.answers[k] for k in keys]

                def consume(current: TaskRecord, taken: list[Any] = answers) -> bool:
                    for key, answer in zip(keys, taken, strict=True):
                        current.answers.pop(key, None)
                        if current.runs:  # run by a task queue: kept for a re-run
                            current.given[key] = answer
                    return True

                self.tasks.store.update(task_id, consume)  # nothing a client sees changes
                return answers
            # Answers come when a person acts: read less often the longer it takes.
            time.sleep(delay)
            delay = min(delay * 2, MAX_ANSWER_CHECK_INTERVAL)

    def _replay(self, questions: list[InputRequest]) -> list[Any] | None:
        """The answers the first run took for these questions' keys, when it took them all."""
        record = self.read()
        if record is None:
            raise RequestCancelled()
        if not all(q.key in record.given for q in questions):
            return None
        answers = [record.given[q.key] for q in questions]
        return answers
