"""Task tools on Celery (``MCP_TASK_RUNNER = "celery"``, docs/celery.md).

The web worker stores the task and sends :data:`TASK_NAME` to the app's Celery
app (``app.extensions["celery"]``, Flask's documented pattern); a Celery worker
runs the tool in the Flask app's context against the same task store. The
same Celery task runs durable calls of 2025 sessions (``@mcp.tool(durable=True)``,
and task tools): their message also names the call's stream in the event log,
which the Celery worker writes (:mod:`flask_mcp.protocol.durable`). The
Celery task acknowledges late and is rejected back to the queue when its
worker process dies, so another worker runs it again (see
:mod:`flask_mcp.protocol.queued_tasks`). Needs the ``celery`` extra.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

from celery import shared_task
from flask import Flask, current_app, has_app_context

from ..auth.tokens import Principal
from ..protocol.durable_records import DurableRecord
from ..protocol.errors import InternalError
from ..protocol.meta import parse_request_meta
from ..protocol.request_info import RequestInfo
from ..protocol.task_records import TaskRecord
from ..protocol.versions import REVISIONS

logger = logging.getLogger("flask_mcp")

#: The Celery task's name (what ``celery inspect registered`` and Flower show).
TASK_NAME = "flask_mcp.run_task"

#: Headers never put on the broker: the caller's credentials stay in the web tier.
_PRIVATE_HEADERS = frozenset({"authorization", "cookie", "proxy-authorization"})

#: The Flask apps of this process that run tasks on Celery: a worker whose Celery
#: app does not push an app context runs the task in the latest one.
_APPS: weakref.WeakSet[Flask] = weakref.WeakSet()


def register(app: Flask) -> None:
    """Remember ``app`` as one whose tasks this process may run."""
    _APPS.add(app)


def send(record: TaskRecord, request: RequestInfo, tool: str, arguments: dict[str, Any]) -> None:
    """Queue the task of ``record`` on the app's Celery app (the web worker's part)."""
    _celery().send_task(TASK_NAME, args=[payload(record.task_id, request)], task_id=record.queue_id)


def send_durable(request: RequestInfo, stream: str, stream_id: str, record: TaskRecord | None = None) -> None:
    """Queue a durable call (the web worker's part): the call as :func:`payload`
    carries it (with the id of its ``record``, which the Celery worker keeps up
    to date), plus its session and the stream the Celery worker writes. The
    Celery task id is the record's ``queue_id``, as ``flask mcp sessions`` shows it."""
    celery = _celery()
    assert request.session is not None
    task_id = record.task_id if record is not None else None
    message = {**payload(task_id, request), "session": request.session.id, "stream": stream, "stream_id": stream_id}
    celery.send_task(TASK_NAME, args=[message], task_id=record.queue_id if record is not None else None)


def _celery() -> Any:
    celery = current_app.extensions.get("celery")
    if celery is None:
        raise InternalError(
            'MCP_TASK_RUNNER = "celery" needs the app\'s Celery app in app.extensions["celery"] '
            "(Flask's Celery pattern; see docs/celery.md)."
        )
    return celery


def payload(task_id: str | None, request: RequestInfo) -> dict[str, Any]:
    """What the Celery message carries: the call as JSON (no credentials), and
    the trace context of the web worker's span when it is traced."""
    auth = request.auth
    principal = None
    if isinstance(auth, Principal):
        principal = {
            "subject": auth.subject,
            "scopes": sorted(auth.scopes),
            "expires_at": auth.expires_at,
            "client_id": auth.client_id,
            "audience": list(auth.audience) if auth.audience is not None else None,
            "claims": dict(auth.claims),
        }
    return {
        "task_id": task_id,
        "version": request.revision.version,
        "method": request.method,
        "params": request.params,
        "headers": {k: v for k, v in request.headers.items() if k.lower() not in _PRIVATE_HEADERS},
        "request_id": request.request_id,
        "client_info": request.client_info,
        "client_capabilities": request.client_capabilities,
        "principal": request.principal,
        "auth": principal,
        "input_responses": request.input_responses,
        "endpoint": request.endpoint_url,
        # The W3C trace context of the web worker's span (traceparent, tracestate):
        # the worker's span continues the call's trace (docs/observability.md).
        "trace_context": request.carried_now(),
    }


def request_from(message: dict[str, Any]) -> RequestInfo:
    """The ``RequestInfo`` a Celery worker runs the tool with."""
    revision = REVISIONS[message["version"]]
    params = message["params"]
    auth = message.get("auth")
    return RequestInfo(
        revision=revision,
        method=message["method"],
        params=params,
        headers=message["headers"],
        request_id=message.get("request_id"),
        client_info=message.get("client_info"),
        client_capabilities=message.get("client_capabilities") or {},
        meta=parse_request_meta(params) if revision.stateless else None,
        principal=message.get("principal"),
        auth=Principal(**auth) if auth else None,
        input_responses=message.get("input_responses") or {},
        endpoint=message.get("endpoint"),
        carried=_trace_context(message.get("trace_context")),
    )


def _trace_context(value: Any) -> dict[str, str] | None:
    """The message's trace context, if it is one (strings only: it goes to a propagator)."""
    if isinstance(value, dict) and isinstance(value.get("traceparent"), str):
        return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}
    return None


def run(message: dict[str, Any]) -> str | None:
    """Run one queued task in the current app (its status at the end)."""
    state = current_app.extensions["mcp"]
    if message.get("stream"):
        return run_durable(state, message)
    return state.server.methods.resume_task(message["task_id"], request_from(message))  # type: ignore[no-any-return]


def run_durable(state: Any, message: dict[str, Any]) -> str | None:
    """Run one durable call in the current app, writing its stream; how it went."""
    server = state.server
    if server.events is None or server.bus is None:
        raise RuntimeError("A durable call reached a Celery worker whose MCP_BACKEND keeps no event log and bus.")
    request = request_from(message)
    record_id = message.get("task_id") if isinstance(message.get("task_id"), str) else None
    request.session = server.sessions.get(message["session"])
    if request.session is None:  # ended (DELETE) or expired: nobody can read the answer
        logger.info("Durable call %s: its session is gone; not run", message["stream"])
        tasks = server.methods.tasks
        if record_id is not None and tasks is not None:
            DurableRecord(tasks.store, record_id, clock=tasks.clock).ended("session_gone")
        return None
    keep_alive = getattr(server.events, "retention", 600.0) / 3
    return server.run_durable(  # type: ignore[no-any-return]
        request, message["stream"], keep_alive=keep_alive, record_id=record_id)


def _run_queued_task(message: dict[str, Any]) -> str | None:
    """The Celery task: in the Flask app's context (the app's own Celery task
    class pushes it; else the app this worker built)."""
    if has_app_context() and "mcp" in current_app.extensions:
        return run(message)
    apps = list(_APPS)
    if not apps:
        raise RuntimeError("No Flask app with MCP_TASK_RUNNER = 'celery' was created in this Celery worker.")
    with apps[-1].app_context():
        return run(message)


#: Acknowledged once it ends, and back in the queue when its worker process dies.
run_queued_task = shared_task(name=TASK_NAME, acks_late=True, reject_on_worker_lost=True, ignore_result=True)(
    _run_queued_task
)
