"""The OpenTelemetry side of :mod:`flask_mcp.telemetry` (``opentelemetry-api`` only).

Importing this module fails without the API; :class:`~flask_mcp.telemetry.Telemetry`
then keeps the access log only. Whether an SDK is configured is checked on each
request (an app may set its providers after ``init_app``, e.g. in a gunicorn
``post_fork`` hook), and costs one provider lookup when none is.
"""

from __future__ import annotations

import os
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from opentelemetry import context, metrics, propagate, trace
from opentelemetry.trace import Link, SpanKind, Status, StatusCode

from ..protocol.request_info import RequestInfo
from ..protocol.task_handle import TaskHandle
from ..protocol.task_records import CANCELLED, FAILED, TaskRecord
from .gauges import GaugeSources
from .meters import make_instruments, metric_attributes, observe
from .names import (
    DURABLE_SPAN,
    FIRST_ROUND_LINK,
    RESUME_SPAN,
    STREAM_EVENTS,
    TASK_ID,
    TASK_STATUS,
)

_SCOPE = "flask_mcp"
#: Seconds between two lookups of the global providers (an SDK set later is seen within it).
LOOK_INTERVAL = 1.0
#: The trace context keys read from ``params._meta`` (unprefixed, as SEP-414 says).
_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


def _look_soon(reference: weakref.ref[Instruments]) -> None:
    instruments = reference()
    if instruments is not None:
        instruments.next_look = 0.0


def _is_api_default(provider: object, package: str) -> bool:
    """The API's own proxy or no-op provider, i.e. no SDK configured."""
    return type(provider).__module__.startswith(package)


class Instruments:
    """The tracer and the two histograms, (re)made when the global providers change."""

    def __init__(self, version: str) -> None:
        self.version = version
        self._tracer_provider: object = None
        self._meter_provider: object = None
        self.tracer: trace.Tracer | None = None
        self.operation: metrics.Histogram | None = None
        self.session: metrics.Histogram | None = None
        self.tasks_ended: metrics.Counter | None = None
        #: What the operator gauges read (set by the extension; ``None``: no gauges).
        self.sources: GaugeSources | None = None
        #: Providers of this app's own, used instead of the global ones (see :meth:`use`).
        self.own_tracer_provider: trace.TracerProvider | None = None
        self.own_meter_provider: metrics.MeterProvider | None = None

        #: When the providers are looked up again (``time.monotonic()``).
        self.next_look = 0.0
        # A forked process (a gunicorn or Celery pool worker) usually sets its
        # providers just after the fork: look again at its first check.
        reference = weakref.ref(self)
        os.register_at_fork(after_in_child=lambda: _look_soon(reference))

    def use(self, tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None) -> None:
        self.own_tracer_provider = tracer_provider
        self.own_meter_provider = meter_provider
        self.next_look = time.monotonic() + LOOK_INTERVAL
        self._look()  # the gauges report from now on, before any request

    def gauges(self, sources: GaugeSources) -> None:
        """Read the operator gauges from ``sources``, with the meter provider
        in use now (looked up again) or later."""
        self.sources = sources
        self._meter_provider = None
        self.next_look = time.monotonic() + LOOK_INTERVAL
        self._look()

    def active(self) -> bool:
        """Whether an SDK listens: the hot path's one check. The global providers
        are looked up at most once a second (the API's lookup tests
        ``os.environ`` and costs microseconds while no SDK is set)."""
        now = time.monotonic()
        if now >= self.next_look:
            self.next_look = now + LOOK_INTERVAL
            self._look()
        return self.tracer is not None or self.operation is not None

    def _look(self) -> None:
        """(Re)make the tracer and histograms when a provider changed."""
        tracer_provider = self.own_tracer_provider or trace.get_tracer_provider()
        meter_provider = self.own_meter_provider or metrics.get_meter_provider()
        if tracer_provider is not self._tracer_provider:
            self._tracer_provider = tracer_provider
            self.tracer = (None if _is_api_default(tracer_provider, "opentelemetry.trace")
                           else tracer_provider.get_tracer(_SCOPE, self.version))
        if meter_provider is not self._meter_provider:
            self._meter_provider = meter_provider
            if _is_api_default(meter_provider, "opentelemetry.metrics"):
                self.operation = self.session = self.tasks_ended = None
            else:
                meter = meter_provider.get_meter(_SCOPE, self.version)
                self.operation, self.session, self.tasks_ended = make_instruments(meter)
                if self.sources is not None:
                    observe(meter, self.sources)

    def start(self, method: str, target: str | None, attributes: dict[str, Any],
              params: Mapping[str, Any], headers: Mapping[str, str],
              first_round: Mapping[str, str] | None = None) -> Any:
        """Start the server span, made current (a tool's own spans nest under it).
        Its parent is the trace context in ``params._meta`` (the ambient one,
        e.g. opentelemetry-instrumentation-flask's span, is then linked), else the
        ambient context, else the HTTP headers'. ``first_round``: the context of
        the first round of a multi round-trip call, sealed in the retry's
        ``requestState``: linked when the retry brought a context of its own,
        else the parent (the retry continues the call's trace). Returns what
        :meth:`end` needs."""
        if self.tracer is None:
            return (None, None)
        meta = params.get("_meta")
        links: list[Link] = []
        ambient = trace.get_current_span().get_span_context()
        if isinstance(meta, Mapping) and isinstance(meta.get("traceparent"), str):
            carrier = {key: meta[key] for key in _TRACE_KEYS if isinstance(meta.get(key), str)}
            parent = propagate.extract(carrier)
            if ambient.is_valid:
                links.append(Link(ambient))
        elif ambient.is_valid:
            parent = None
        else:
            parent = propagate.extract(headers)
        if first_round is not None:
            origin = trace.get_current_span(propagate.extract(first_round)).get_span_context()
            if origin.is_valid:
                if parent is None or trace.get_current_span(parent).get_span_context().is_valid:
                    links.append(Link(origin, {FIRST_ROUND_LINK: True}))
                else:  # the retry came with no trace context: it continues the first round's trace
                    parent = trace.set_span_in_context(trace.NonRecordingSpan(origin))
        name = method if target is None else f"{method} {target}"
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.SERVER, attributes=attributes, links=links)
        token = context.attach(trace.set_span_in_context(span))
        return (span, token)

    def start_durable(self, target: str | None, attributes: dict[str, Any],
                      carried: Mapping[str, str] | None) -> Any:
        """Start a durable call's ``INTERNAL`` span on its queue worker, named
        ``durable {tool}``, made current (the tool's spans nest under it). Its
        parent is the web worker's ``tools/call`` span (``carried``, from the
        queue message); an ambient span there (a Celery instrumentation's) is
        linked. Returns what :meth:`end` needs (with ``record=False``)."""
        assert self.tracer is not None
        parent, links = _carried_parent(carried)
        name = DURABLE_SPAN if target is None else f"{DURABLE_SPAN} {target}"
        span = self.tracer.start_span(name, context=parent, kind=SpanKind.INTERNAL, attributes=attributes,
                                      links=links)
        token = context.attach(trace.set_span_in_context(span))
        return (span, token)

    @staticmethod
    def link(started: Any, carrier: Mapping[str, str], marker: str) -> None:
        """Link the span :meth:`start` returned to the span ``carrier`` names."""
        origin = trace.get_current_span(propagate.extract(carrier)).get_span_context()
        if origin.is_valid and started[0] is not None:
            started[0].add_link(origin, {marker: True})

    def run_task(self, handle: TaskHandle, tool: str, work: Callable[[], None],
                 carried: Mapping[str, str] | None = None) -> None:
        """Run a task tool inside an ``INTERNAL`` span named ``task {tool}``: a
        child of the ``tools/call`` span that started it, which it outlives.
        In a thread of the worker that took the call, that call's context is
        the current one; on a task queue's worker, ``carried`` (the record's
        copy of it) is the parent, and an ambient span there (a Celery
        instrumentation's) is linked. Counts how it ended on
        ``flask_mcp.tasks.ended``."""
        if self.tracer is None:
            try:
                work()
            finally:
                self._count_end(handle)
            return
        attributes = task_attributes(handle.request, tool)
        parent, links = _carried_parent(carried)
        with self.tracer.start_as_current_span(f"task {tool}", context=parent, kind=SpanKind.INTERNAL,
                                               attributes=attributes, links=links,
                                               record_exception=False, set_status_on_exception=False) as span:
            try:
                work()
            finally:
                if handle.task_id is not None:
                    span.set_attribute(TASK_ID, handle.task_id)
                ended = handle.ended
                if ended is not None:
                    span.set_attribute(TASK_STATUS, ended.status)
                    error_type = _task_error_type(ended)
                    if error_type is not None:
                        span.set_attribute("error.type", error_type)
                        span.set_status(Status(StatusCode.ERROR, ended.status_message))
                self._count_end(handle)

    def _count_end(self, handle: TaskHandle) -> None:
        ended = handle.ended
        if ended is not None and self.tasks_ended is not None:
            self.tasks_ended.add(1, {TASK_STATUS: ended.status})

    def start_resume(self, attributes: dict[str, Any], carried: Mapping[str, str] | None,
                     headers: Mapping[str, str]) -> Callable[[int, str | None], None]:
        """Start a resumed stream's ``SERVER`` span (not made current: it lasts
        as long as the stream, across the response's iterations). Its parent is
        the call that opened the stream (``carried``, kept in the stream's
        priming event): the events it relays are that call's. The GET's own
        context (an instrumentation's HTTP span, else the ``traceparent``
        header) is linked; with no ``carried`` it is the parent. Returns
        ``end(events relayed, error type or None)``."""
        assert self.tracer is not None
        ambient = trace.get_current_span().get_span_context()
        own = ambient if ambient.is_valid else trace.get_current_span(propagate.extract(headers)).get_span_context()
        origin = trace.get_current_span(propagate.extract(carried)).get_span_context() if carried else None
        links: list[Link] = []
        parent: context.Context | None
        if origin is not None and origin.is_valid:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(origin))
            if own.is_valid:
                links.append(Link(own))
        else:
            parent = trace.set_span_in_context(trace.NonRecordingSpan(own)) if own.is_valid else None
        span = self.tracer.start_span(RESUME_SPAN, context=parent, kind=SpanKind.SERVER, attributes=attributes,
                                      links=links)

        def end(events: int, error_type: str | None) -> None:
            span.set_attribute(STREAM_EVENTS, events)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                span.set_status(Status(StatusCode.ERROR))
            span.end()

        return end

    @staticmethod
    def current_carrier() -> dict[str, str] | None:
        """The current span's trace context as a carrier; ``None`` without a valid span."""
        if not trace.get_current_span().get_span_context().is_valid:
            return None
        found: dict[str, str] = {}
        propagate.inject(found)
        return found

    @staticmethod
    def context_of(started: Any) -> Callable[[], dict[str, str]]:
        """The trace context of the span :meth:`start` returned, as a carrier
        (``traceparent``...), made when called."""
        span = started[0]

        def carrier() -> dict[str, str]:
            found: dict[str, str] = {}
            propagate.inject(found, context=trace.set_span_in_context(span))
            return found

        return carrier

    @staticmethod
    def carrying_context(emit: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
        """``emit``, adding the current trace context to the ``params._meta`` of
        the requests it sends the client (notifications go as they are)."""

        def emit_with_context(message: dict[str, Any]) -> None:
            if "id" in message and "method" in message:
                message["params"] = _with_context(message.get("params"))
            emit(message)

        return emit_with_context

    @staticmethod
    def inject_into_input_requests(body: Any) -> None:
        """A 2026-07-28 ``input_required`` result: its input requests carry the
        trace context too (the client runs them, then retries the call)."""
        result = body.get("result") if isinstance(body, dict) else None
        if not isinstance(result, dict) or result.get("resultType") != "input_required":
            return
        requests = result.get("inputRequests")
        if isinstance(requests, dict):
            for item in requests.values():
                if isinstance(item, dict):
                    item["params"] = _with_context(item.get("params"))

    def end(self, started: Any, attributes: dict[str, Any], error_type: str | None,
            description: str | None, seconds: float, record: bool = True) -> str | None:
        """End the span and record the duration (unless not ``record``); the
        trace id (hex) for the access log."""
        span, token = started
        if error_type is not None:
            attributes["error.type"] = error_type
            if error_type.lstrip("-").isdigit() and len(error_type) > 3:  # a JSON-RPC code, not an HTTP status
                attributes["rpc.response.status_code"] = error_type
        trace_id = None
        if span is not None:
            context.detach(token)
            if error_type is not None:
                span.set_attribute("error.type", error_type)
                if "rpc.response.status_code" in attributes:
                    span.set_attribute("rpc.response.status_code", error_type)
                span.set_status(Status(StatusCode.ERROR, description))
            span.end()
            span_context = span.get_span_context()
            if span_context.is_valid:
                trace_id = format(span_context.trace_id, "032x")
        if record and self.operation is not None:
            self.operation.record(seconds, metric_attributes(attributes, error_type))
        return trace_id

    def session_ended(self, seconds: float, version: str) -> None:
        if self.session is not None:
            self.session.record(seconds, {"mcp.protocol.version": version, "network.transport": "tcp",
                                          "network.protocol.name": "http"})


def _carried_parent(carried: Mapping[str, str] | None) -> tuple[context.Context | None, list[Link]]:
    """The parent a queue worker's span takes from the record's ``carried``
    context, and a link to the ambient span there (a Celery instrumentation's)."""
    if not carried:
        return None, []
    ambient = trace.get_current_span().get_span_context()
    return propagate.extract(carried), [Link(ambient)] if ambient.is_valid else []


def task_attributes(request: RequestInfo, tool: str) -> dict[str, Any]:
    """The ``task {tool}`` span's attributes: the conventions' ones of the
    ``tools/call`` that started it (but ``network.*``: a task queue's worker
    has no connection to the client), so the run is found as the call is."""
    attributes: dict[str, Any] = {"mcp.method.name": request.method, "mcp.protocol.version": request.revision.version,
                                  "gen_ai.tool.name": tool, "gen_ai.operation.name": "execute_tool"}
    if request.session is not None:
        attributes["mcp.session.id"] = request.session.id
    if request.request_id is not None:
        attributes["jsonrpc.request.id"] = str(request.request_id)
    return attributes


def _task_error_type(record: TaskRecord) -> str | None:
    """``error.type`` of a task's run, as for a call answered at once."""
    if record.status == CANCELLED:
        return "cancelled"
    if record.status == FAILED:
        code = record.error.get("code") if isinstance(record.error, dict) else None
        return str(code) if code is not None else FAILED
    if isinstance(record.result, dict) and record.result.get("isError") is True:
        return "tool_error"
    return None


def _with_context(params: Any) -> dict[str, Any]:
    """A copy of ``params`` whose ``_meta`` carries the current trace context."""
    copy: dict[str, Any] = dict(params) if isinstance(params, dict) else {}
    meta = dict(copy.get("_meta") or {})
    propagate.inject(meta)
    copy["_meta"] = meta
    return copy
