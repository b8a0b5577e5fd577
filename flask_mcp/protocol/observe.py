"""What an observer of the core (tracing, metrics, the access log) is handed.

The core stays free of any telemetry library: it calls an :class:`Observer`
when one is set (``Server.observer``), and does nothing extra when none is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from .jsonrpc import ClientResponse, Notification, Request
from .request_info import RequestInfo
from .session import Session
from .transport import Incoming, Reply

if TYPE_CHECKING:
    from .task_handle import TaskHandle

#: Runs one request: the core's own dispatch, which the observer wraps.
Run = Callable[[Request, RequestInfo], Reply]


class Observer(Protocol):
    """Watches every request and notification the core serves."""

    def listening(self) -> bool:
        """Whether :meth:`request` would record anything now (otherwise the core
        may answer a request without handing it over)."""

    def request(self, message: Request, request: RequestInfo, run: Run) -> Reply:
        """Serve ``message`` by calling ``run(message, request)``, watching it
        (the call may raise :class:`~.request_info.RequestCancelled`)."""

    def durable_run(self, message: Request, request: RequestInfo, run: Run) -> Reply:
        """Run a durable call on a queue worker by calling ``run(message, request)``,
        watching it as part of the call the web worker handed over (its trace
        context: ``request.carried``), which the :meth:`request` there counted already."""

    def notification(self, message: Notification, incoming: Incoming, session: Session | None, version: str) -> None:
        """A notification the client sent (already handled, or about to be)."""

    def response(self, message: ClientResponse, incoming: Incoming, session: Session) -> None:
        """The client's answer to a request the server sent (legacy sessions),
        about to travel to the worker that asked."""

    def session_ended(self, session: Session, now: float) -> None:
        """A legacy session ended by the client's ``DELETE``."""


class TaskObserver(Protocol):
    """Watches the runs of task tools in this process (the tasks extension)."""

    def task(self, handle: TaskHandle, tool: str, work: Callable[[], None],
             carried: Mapping[str, str] | None = None) -> Callable[[], None]:
        """``work``, the run of task tool ``tool``, as it should run in its
        thread (``handle`` has the task's id once it started, and its record
        as it ended in :attr:`~.task_handle.TaskHandle.ended`). ``carried``:
        the creating call's trace context from the task's record, for a run
        outside that call's context (a task queue's worker); ``None``: the run
        is in it already (a thread of the worker that took the call)."""
