"""Task records and the store contract: what the backends keep for a task
(``TaskRecord``, its statuses and wire forms) and what a task store must do
(``TaskStore``). Running tasks is ``task_methods.py``'s job."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

#: The tasks extension's identifier, in ``capabilities.extensions``.
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

WORKING = "working"
INPUT_REQUIRED = "input_required"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
TERMINAL = frozenset({COMPLETED, FAILED, CANCELLED})


def extension_declared(client_capabilities: dict[str, Any]) -> bool:
    """Whether these client capabilities name the tasks extension."""
    extensions = client_capabilities.get("extensions")
    return isinstance(extensions, dict) and isinstance(extensions.get(TASKS_EXTENSION), dict)


def iso(timestamp: float) -> str:
    """An ISO 8601 UTC timestamp with milliseconds, e.g. ``2026-07-28T10:30:00.000Z``."""
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(slots=True)
class TaskRecord:
    """Everything a worker needs to answer for a task, as stored in the backend."""

    task_id: str
    principal: str | None = None
    status: str = WORKING
    status_message: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None
    #: Questions the tool waits on, by key (wire form: ``{"method", "params"}``).
    input_requests: dict[str, Any] = field(default_factory=dict)
    #: Answers received and not yet taken by the tool, by key.
    answers: dict[str, Any] = field(default_factory=dict)
    #: Every key ever asked: a key is never reused over a task's life.
    asked: list[str] = field(default_factory=list)
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    cancel_requested: bool = False
    #: Sent to a task queue (``MCP_TASK_RUNNER = "celery"``) and not yet picked up by a worker.
    queued: bool = False
    #: How many times a queue worker began running the tool (above 1: re-run after a worker died).
    runs: int = 0
    #: Answers the tool already took, by key: a re-run gets them again instead of asking anew.
    given: dict[str, Any] = field(default_factory=dict)
    #: The trace context of the call that created the task (an observer's, see
    #: ``RequestInfo.carried``): later ``tasks/*`` requests link it.
    carried: dict[str, str] | None = None
    #: What an operator sees of the call (``flask mcp sessions``): the tool's name,
    #: the legacy session it came from, and the task queue's id for its message
    #: (the Celery task id; ``None`` in a thread of the web worker).
    tool: str | None = None
    session_id: str | None = None
    queue_id: str | None = None
    #: A durable call of a 2025 session (``@mcp.tool(durable=True)``), not an MCP
    #: task: listed to operators, never shown to a client (``tasks/get`` knows
    #: no such id); ``stream_id`` names the call's stream in the event log.
    durable: bool = False
    stream_id: str | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def expires_at(self) -> float | None:
        return None if self.ttl_ms is None else self.created_at + self.ttl_ms / 1000

    def expired(self, now: float) -> bool:
        expires = self.expires_at
        return expires is not None and now > expires

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> TaskRecord:
        return cls(**{k: v for k, v in record.items() if k in cls.__dataclass_fields__})

    def task(self) -> dict[str, Any]:
        """The ``Task`` fields (wire names: ``ttlMs``, ``pollIntervalMs``, ISO timestamps)."""
        task: dict[str, Any] = {"taskId": self.task_id, "status": self.status}
        if self.status_message:
            task["statusMessage"] = self.status_message
        task["createdAt"] = iso(self.created_at)
        task["lastUpdatedAt"] = iso(self.updated_at)
        task["ttlMs"] = self.ttl_ms
        if self.poll_interval_ms is not None:
            task["pollIntervalMs"] = self.poll_interval_ms
        return task

    def created(self) -> dict[str, Any]:
        """The flat ``CreateTaskResult``."""
        return {"resultType": "task", **self.task()}

    def detailed(self) -> dict[str, Any]:
        """The ``DetailedTask`` of ``tasks/get``: the task plus what its status carries."""
        task = self.task()
        if self.status == INPUT_REQUIRED:
            task["inputRequests"] = dict(self.input_requests)
        elif self.status == COMPLETED and self.result is not None:
            task["result"] = self.result
        elif self.status == FAILED and self.error is not None:
            task["error"] = self.error
        return task


@runtime_checkable
class TaskStore(Protocol):
    """Where task records live; every worker that serves the endpoint must share it."""

    def create(self, record: TaskRecord) -> None:
        """Store a new record; durable once this returns (any worker can read it)."""

    def get(self, task_id: str) -> TaskRecord | None:
        """The record, or ``None`` when unknown or past its TTL."""

    def update(self, task_id: str, change: Callable[[TaskRecord], bool]) -> TaskRecord | None:
        """Apply ``change`` atomically against concurrent updates from any worker
        (it may be called more than once, so it only edits the record) and store
        the result unless it returns ``False``; ``None`` when unknown or expired."""


def unfinished_first(records: list[TaskRecord], now: float, limit: int) -> list[TaskRecord]:
    """The records still running (within their TTL, not ended), oldest first, at most ``limit``."""
    live = [r for r in records if not r.terminal and not r.expired(now)]
    live.sort(key=lambda r: (r.created_at, r.task_id))
    return live[:limit]
