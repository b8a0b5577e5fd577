"""Spans and metrics by OpenTelemetry's MCP semantic conventions, and the access log.

Installed on the core as its observer (``Server.observer``). Each request first
asks, cheaply, whether anybody listens: an OpenTelemetry SDK set as the global
tracer or meter provider, or an ``INFO`` handler on the ``flask_mcp.access``
logger. When nobody does, the request runs as if unobserved. Only
``opentelemetry-api`` is used (the ``otel`` extra); without it the access log
still works.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..protocol.jsonrpc import ClientResponse, Notification, Request
from ..protocol.observe import Run
from ..protocol.request_info import RequestCancelled, RequestInfo
from ..protocol.session import Session, StoreUnavailable
from ..protocol.transport import Incoming, Reply
from .names import ACCESS_LOGGER, RESPONSE_SPAN, RESUME_SPAN, STREAM_LAST_EVENT_ID, TASK_CALL_LINK, TASK_ID

if TYPE_CHECKING:
    from ..protocol.round_trips import RoundTrips
    from ..protocol.task_handle import TaskHandle
    from .gauges import GaugeSources

#: One record per MCP request: method, target, outcome, duration, session, subject.
access_log = logging.getLogger(ACCESS_LOGGER)

_TARGETS = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
_URI_METHODS = frozenset({"resources/read", "resources/subscribe", "resources/unsubscribe",
                          "notifications/resources/updated"})
_INFO = logging.INFO
#: The methods whose calls may span several rounds (2026-07-28 ``input_required``).
_ROUND_TRIP_METHODS = frozenset({"tools/call", "prompts/get", "resources/read"})


class Telemetry:
    """The core's observer: see the module's docstring."""

    def __init__(self, version: str, rounds: RoundTrips | None = None) -> None:
        self.version = version
        #: Opens a retry's ``requestState`` (the first round's trace context).
        self.rounds = rounds
        try:
            from . import otel
        except ImportError:  # no opentelemetry-api: the access log only
            self.otel: Any = None
        else:
            self.otel = otel.Instruments(version)

    def gauges(self, sources: GaugeSources) -> None:
        """What the operator gauges read (the extension hands them over): made
        now with the meter provider in use, or with the next one seen."""
        if self.otel is not None:
            self.otel.gauges(sources)

    def use(self, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        """Record this app's spans and metrics with these providers instead of
        the global ones (an app with providers of its own; tests). ``None``:
        the global provider again. Needs ``opentelemetry-api``."""
        if self.otel is None:
            raise RuntimeError("Telemetry providers need opentelemetry-api: pip install 'flask-mcp[otel]'.")
        self.otel.use(tracer_provider, meter_provider)

    # ------------------------------------------------------------------ requests

    def listening(self) -> bool:
        """Whether a request would be recorded now: an SDK provider seen, or the access log on."""
        return self._tracing() or access_log.isEnabledFor(_INFO)

    def _tracing(self) -> bool:
        """Whether an OpenTelemetry SDK records spans or metrics now."""
        otel = self.otel
        # otel.active(), its usual answer without its call: no SDK at the last look, not time to look again.
        quiet = otel is None or (otel.tracer is None and otel.operation is None and time.monotonic() < otel.next_look)
        return not quiet and otel.active()

    def request(self, message: Request, request: RequestInfo, run: Run) -> Reply:
        otel = self.otel
        active = self._tracing()
        if not active and not access_log.isEnabledFor(_INFO):
            return run(message, request)  # nobody listens: the usual request
        method = message.method
        params = message.params
        attributes = _attributes(method, params, request.revision.version,
                                 request.session.id if request.session is not None else None)
        if message.id is not None:
            attributes["jsonrpc.request.id"] = str(message.id)
        target = _target(method, params)
        started = time.perf_counter()
        span = None
        if active:
            first_round = self._first_round(params) if method in _ROUND_TRIP_METHODS else None
            span = otel.start(method, target, attributes, params, request.headers, first_round)
        tracing = span is not None and span[0] is not None
        emit = request.emit
        if tracing:  # the server's own requests (elicitation, sampling, roots) carry the trace
            request.emit = otel.carrying_context(emit)
            if method in _ROUND_TRIP_METHODS:  # an input_required result or a task keeps the first round's
                request.carried = first_round or otel.context_of(span)  # context, made only if one needs it
        error_type: str | None = None
        message_text: str | None = None
        try:
            reply = run(message, request)
            error_type, message_text = _outcome(reply)
            if tracing:
                otel.inject_into_input_requests(reply.body)
                if method.startswith("tasks/") and isinstance(request.carried, dict):  # from the task's record
                    otel.link(span, request.carried, TASK_CALL_LINK)
            return reply
        except RequestCancelled:
            error_type, message_text = "cancelled", "The client cancelled the request."
            raise
        except StoreUnavailable:
            error_type, message_text = "store_unavailable", "The session store is unavailable."
            raise
        finally:
            request.emit = emit
            seconds = time.perf_counter() - started
            trace_id = None
            if span is not None:
                trace_id = otel.end(span, attributes, error_type, message_text, seconds)
            if access_log.isEnabledFor(_INFO):
                _log_access(method, target, error_type, seconds, request, message.id, trace_id)

    def durable_run(self, message: Request, request: RequestInfo, run: Run) -> Reply:
        """A durable call's run on a queue worker: an ``INTERNAL`` span in the trace
        of the web worker's ``tools/call`` span (``request.carried``, from the
        queue message), recorded in no metric and no access record (the web
        worker's hand-off was: one call, counted once)."""
        otel = self.otel
        if otel is None or not otel.active() or otel.tracer is None:
            return run(message, request)
        attributes = _attributes(message.method, message.params, request.revision.version,
                                 request.session.id if request.session is not None else None)
        if message.id is not None:
            attributes["jsonrpc.request.id"] = str(message.id)
        carried = request.carried_now()
        started = otel.start_durable(_target(message.method, message.params), attributes, carried)
        emit = request.emit
        request.emit = otel.carrying_context(emit)  # its questions to the client carry the trace
        error_type: str | None = None
        text: str | None = None
        try:
            reply = run(message, request)
            error_type, text = _outcome(reply)
            return reply
        except RequestCancelled:
            error_type, text = "cancelled", "The client cancelled the request."
            raise
        except StoreUnavailable:
            error_type, text = "store_unavailable", "The session store is unavailable."
            raise
        finally:
            request.emit = emit
            otel.end(started, attributes, error_type, text, 0.0, record=False)

    def _first_round(self, params: dict[str, Any]) -> dict[str, str] | None:
        """The first round's trace context, sealed in a retry's ``requestState``."""
        state = params.get("requestState")
        if state is None or self.rounds is None:
            return None
        return self.rounds.carried(state)

    def refused(self, body: bytes, status: int, description: str, headers: Mapping[str, str]) -> None:
        """A request the HTTP layer turned away before the core saw it
        (401, 403, 429): a span and a record, named after the method it asked for."""
        otel = self.otel
        active = otel is not None and otel.active()
        if not active and not access_log.isEnabledFor(_INFO):
            return
        import json

        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):  # not JSON, or nested past the interpreter's limit
            payload = None
        if not isinstance(payload, dict) or not isinstance(payload.get("method"), str):
            return  # not one MCP message: the HTTP server's log has it
        method = payload["method"]
        params = payload.get("params")
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        version = headers.get("mcp-protocol-version") or (
            meta.get("io.modelcontextprotocol/protocolVersion") if isinstance(meta, dict) else None)
        attributes = _attributes(method, params, version if isinstance(version, str) else None,
                                 headers.get("mcp-session-id"))
        request_id = payload.get("id")
        if isinstance(request_id, (str, int)):
            attributes["jsonrpc.request.id"] = str(request_id)
        target = _target(method, params)
        trace_id = None
        if active:
            span = otel.start(method, target, attributes, params, headers)
            trace_id = otel.end(span, attributes, str(status), description, 0.0)
        if access_log.isEnabledFor(_INFO):
            access_log.info(
                "%s %s refused %d", method, target or "-", status,
                extra={"mcp_method": method, "mcp_target": target, "mcp_outcome": f"refused {status}",
                       "mcp_duration_ms": 0.0, "mcp_session_id": headers.get("mcp-session-id"),
                       "mcp_subject": None, "mcp_request_id": attributes.get("jsonrpc.request.id"),
                       "trace_id": trace_id},
            )

    # ------------------------------------------------------------------ notifications, sessions

    def notification(self, message: Notification, incoming: Incoming, session: Session | None, version: str) -> None:
        otel = self.otel
        if otel is None or not otel.active():
            return
        attributes = _attributes(message.method, message.params, version or None,
                                 session.id if session is not None else None)
        span = otel.start(message.method, None, attributes, message.params, incoming.headers)
        otel.end(span, attributes, None, None, 0.0)

    def response(self, message: ClientResponse, incoming: Incoming, session: Session) -> None:
        """A span for a client's answer (elicitation, sampling, roots) arriving
        on this worker: its parent is the trace context the answer carries (in
        ``result._meta``, or the HTTP headers), which an instrumented client
        takes from the request it answers; so the answer joins the call's trace."""
        otel = self.otel
        if otel is None or not otel.active() or otel.tracer is None:
            return
        attributes = _attributes(RESPONSE_SPAN, {}, session.protocol_version, session.id)
        del attributes["mcp.method.name"]  # the method is known only to the worker that asked
        attributes["jsonrpc.request.id"] = str(message.id)
        error = message.error
        error_type = None
        description = None
        if error is not None:
            code = error.get("code") if isinstance(error, dict) else None
            error_type = str(code) if code is not None else "error"
            description = error.get("message") if isinstance(error, dict) else None
        result = message.result if isinstance(message.result, dict) else {}
        span = otel.start(RESPONSE_SPAN, None, attributes, result, incoming.headers)
        otel.end(span, attributes, error_type, description if isinstance(description, str) else None, 0.0,
                 record=False)

    def task(self, handle: TaskHandle, tool: str, work: Callable[[], None],
             carried: Mapping[str, str] | None = None) -> Callable[[], None]:
        """A task's run, in a span of its own when tracing (see :meth:`.otel.Instruments.run_task`)."""
        otel = self.otel
        if otel is None or not otel.active():
            return work

        def traced() -> None:
            otel.run_task(handle, tool, work, carried)

        return traced

    def current_context(self) -> dict[str, str] | None:
        """The current span's trace context as a carrier (``traceparent``...),
        when tracing; kept with a resumable stream as it opens."""
        otel = self.otel
        if otel is None or otel.tracer is None:
            return None
        carrier: dict[str, str] | None = otel.current_carrier()
        return carrier

    def resumed(self, stream: str, last_event_id: str, headers: Mapping[str, str],
                stored: Callable[[], Mapping[str, str] | None]) -> Callable[[int, str | None], None] | None:
        """A ``GET`` with ``Last-Event-ID`` picks the stream ``stream`` up again:
        a ``resume`` span in the trace of the call that opened it (``stored()``:
        that call's context, read only when tracing), ended by the returned
        function with how many events it relayed and an ``error.type``, if any;
        ``None`` when not tracing. See :meth:`.otel.Instruments.start_resume`."""
        otel = self.otel
        if otel is None or not otel.active() or otel.tracer is None:
            return None
        session_id = stream.rpartition("/")[0]
        attributes = _attributes(RESUME_SPAN, {}, headers.get("mcp-protocol-version"), session_id or None)
        del attributes["mcp.method.name"]  # no MCP method: a GET picking a stream up
        attributes[STREAM_LAST_EVENT_ID] = last_event_id
        try:
            carried = stored()
        except StoreUnavailable:  # the stream itself says so in a moment
            carried = None
        end: Callable[[int, str | None], None] = otel.start_resume(attributes, carried, headers)
        return end

    def session_ended(self, session: Session, now: float) -> None:
        otel = self.otel
        if otel is not None and otel.active() and session.created_at:
            otel.session_ended(max(0.0, now - session.created_at), session.protocol_version)


def carry_trace_context(work: Callable[[], None]) -> Callable[[], None]:
    """``work``, to run in another thread under the current OpenTelemetry
    context (a task's spans nest under the call that started it). Nothing to
    carry when the API was never imported."""
    otel_context = sys.modules.get("opentelemetry.context")
    if otel_context is None:
        return work
    captured = otel_context.get_current()

    def in_context() -> None:
        token = otel_context.attach(captured)
        try:
            work()
        finally:
            otel_context.detach(token)

    return in_context


def _target(method: str, params: dict[str, Any]) -> str | None:
    """The span name's low-cardinality target: the tool's or prompt's name."""
    if method in _TARGETS:
        name = params.get("name")
        return name if isinstance(name, str) else None
    return None


def _attributes(method: str, params: dict[str, Any], version: str | None, session_id: str | None) -> dict[str, Any]:
    attributes: dict[str, Any] = {"mcp.method.name": method, "network.transport": "tcp",
                                  "network.protocol.name": "http"}
    if version:
        attributes["mcp.protocol.version"] = version
    if session_id:
        attributes["mcp.session.id"] = session_id
    key = _TARGETS.get(method)
    if key is not None:
        name = params.get("name")
        if isinstance(name, str):
            attributes[key] = name
        if method == "tools/call":
            attributes["gen_ai.operation.name"] = "execute_tool"
    elif method in _URI_METHODS:
        uri = params.get("uri")
        if isinstance(uri, str):
            attributes["mcp.resource.uri"] = uri
    elif method.startswith("tasks/"):
        task_id = params.get("taskId")
        if isinstance(task_id, str):
            attributes[TASK_ID] = task_id
    return attributes


def _outcome(reply: Reply) -> tuple[str | None, str | None]:
    """``error.type`` and the status description for an answered request."""
    body = reply.body
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            message = error.get("message")
            return str(error.get("code")), message if isinstance(message, str) else None
        result = body.get("result")
        if isinstance(result, dict) and result.get("isError") is True:
            return "tool_error", None
    if reply.status >= 500:
        return str(reply.status), None
    return None, None


def _log_access(method: str, target: str | None, error_type: str | None, seconds: float,
                request: RequestInfo, request_id: Any, trace_id: str | None) -> None:
    """The access record: the fields as ``extra`` (JSON formatters take them
    as they are), the caller by subject only, never a credential."""
    outcome = "ok" if error_type is None else error_type
    milliseconds = round(seconds * 1000, 3)
    session = request.session
    access_log.info(
        "%s %s %s %.1fms", method, target or "-", outcome, milliseconds,
        extra={"mcp_method": method, "mcp_target": target, "mcp_outcome": outcome,
               "mcp_duration_ms": milliseconds, "mcp_session_id": session.id if session is not None else None,
               "mcp_subject": request.principal, "mcp_request_id": None if request_id is None else str(request_id),
               "mcp_protocol_version": request.revision.version, "trace_id": trace_id},
    )
