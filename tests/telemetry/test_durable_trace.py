"""A durable call is one trace (OpenTelemetry SDK, in-memory exporter): the web
worker's ``tools/call`` span ends at the hand-off, the Celery worker's
``durable`` span (a real worker in this process, on kombu's in-memory broker)
and a resumed ``GET``'s ``resume`` span are its children; the call is counted
once on ``mcp.server.operation.duration``. Across real processes:
tests/e2e/test_e2e_celery_ops.py covers tasks."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import MCPTestClient, parse_sse, sse_event_id

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")
pytest.importorskip("celery", reason="Celery (pip install 'flask-mcp[celery]')")

from celery_in_process import celery_worker, memory_celery_app  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

LEGACY = "2025-11-25"

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
_READER = InMemoryMetricReader()


def build_app() -> Flask:
    app = memory_celery_app(__name__)
    mcp = MCP(app, name="durable-trace", version="1.0")
    app.extensions["mcp"].telemetry.use(_PROVIDER, MeterProvider(metric_readers=[_READER]))
    app.extensions["test-release"] = release = threading.Event()
    tracer = _PROVIDER.get_tracer("tests")

    @mcp.tool(durable=True)
    def stepped(ctx: Context) -> str:
        """Reports once, waits to be released, then does its work in a span of its own."""
        ctx.report_progress(1, 2)
        while not release.wait(0.02):
            ctx.check_cancelled()
        with tracer.start_as_current_span("work"):
            ctx.report_progress(2, 2)
        return "done"

    return app


@pytest.fixture(scope="module")
def traced_app() -> Iterator[Flask]:
    app = build_app()
    with celery_worker(app):
        yield app


@pytest.fixture
def client(make_client: Callable[..., MCPTestClient], traced_app: Flask) -> Iterator[MCPTestClient]:
    release = traced_app.extensions["test-release"]
    release.clear()
    _EXPORTER.clear()
    yield connect(make_client, traced_app, LEGACY)
    release.set()


def post(client: MCPTestClient, request_id: int, meta: dict[str, Any] | None = None) -> Any:
    params = {"name": "stepped", "arguments": {}, "_meta": {"progressToken": "p", **(meta or {})}}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               **client.extra_headers, **client.standard_headers("tools/call", params)}
    return client.client.post(client.url, data=json.dumps(body), headers=headers, buffered=False)


def read_until(response: Any, stop: Callable[[Any], bool]) -> list[tuple[str | None, Any]]:
    """``(id, message)`` of the stream's events until ``stop(message)``."""
    seen: list[tuple[str | None, Any]] = []
    buffer = b""
    for chunk in response.iter_encoded():
        buffer += chunk
        while b"\n\n" in buffer:
            block, buffer = buffer.split(b"\n\n", 1)
            if block.startswith(b":"):
                continue
            data = list(parse_sse(block + b"\n\n"))
            message = json.loads(data[0]) if data and data[0] else None
            seen.append((sse_event_id(block), message))
            if stop(message):
                return seen
    return seen


def finished(name: str, count: int = 1) -> list[ReadableSpan]:
    deadline = time.monotonic() + 10
    while True:
        found = [span for span in _EXPORTER.get_finished_spans() if span.name == name]
        if len(found) >= count:
            assert len(found) == count, [span.name for span in _EXPORTER.get_finished_spans()]
            return found
        assert time.monotonic() < deadline, f"no span {name!r}: {[s.name for s in _EXPORTER.get_finished_spans()]}"
        time.sleep(0.01)


def operation_points(tool: str) -> int:
    """How many calls of ``tool`` ``mcp.server.operation.duration`` counted."""
    data = _READER.get_metrics_data()
    total = 0
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "mcp.server.operation.duration":
                    for point in metric.data.data_points:
                        assert isinstance(point, HistogramDataPoint)
                        if (point.attributes or {}).get("gen_ai.tool.name") == tool:
                            total += point.count
    return total


def test_a_durable_call_s_post_celery_run_and_resumed_get_are_one_trace(
    client: MCPTestClient, caplog: pytest.LogCaptureFixture
) -> None:
    counted_before = operation_points("stepped")
    caplog.set_level(logging.INFO, logger="flask_mcp.access")
    response = post(client, 51)
    first = read_until(response, lambda m: isinstance(m, dict) and m.get("method") == "notifications/progress")
    response.close()
    [call] = finished("tools/call stepped")  # ended at the hand-off, while the tool still runs
    assert call.kind == SpanKind.SERVER and call.status.is_ok
    client.client.application.extensions["test-release"].set()
    last_id = first[-1][0]
    assert last_id is not None
    headers = {"Accept": "text/event-stream", "Last-Event-ID": last_id, "Mcp-Session-Id": client.session_id or "",
               "MCP-Protocol-Version": LEGACY}
    resumed = client.client.get(client.url, headers=headers, buffered=False)
    rest = read_until(resumed, lambda m: isinstance(m, dict) and "result" in m)
    resumed.close()
    assert rest[-1][1]["result"]["content"][0]["text"] == "done"

    [run] = finished("durable stepped")
    [resume] = finished("resume")
    [work] = finished("work")
    assert call.context is not None and run.context is not None and resume.context is not None
    trace_id = call.context.trace_id
    assert {run.context.trace_id, resume.context.trace_id, work.context.trace_id} == {trace_id}
    assert run.kind == SpanKind.INTERNAL and run.parent is not None and run.parent.span_id == call.context.span_id
    assert resume.parent is not None and resume.parent.span_id == call.context.span_id
    assert work.parent is not None and work.parent.span_id == run.context.span_id  # the tool's own spans nest
    assert run.attributes is not None and run.attributes["mcp.session.id"] == client.session_id
    assert run.attributes["jsonrpc.request.id"] == "51" and "error.type" not in run.attributes
    assert [s.name for s in _EXPORTER.get_finished_spans()].count("tools/call stepped") == 1  # none on Celery
    assert operation_points("stepped") - counted_before == 1  # counted once: the hand-off
    [logged] = [r for r in caplog.records
                if r.name == "flask_mcp.access" and getattr(r, "mcp_target", None) == "stepped"]  # web side only
    assert logged.mcp_outcome == "ok" and logged.trace_id == format(trace_id, "032x")  # type: ignore[attr-defined]


def test_a_durable_call_continues_the_client_s_trace_and_its_cancellation_marks_the_run(
    client: MCPTestClient,
) -> None:
    client_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    response = post(client, 52, {"traceparent": f"00-{client_trace}-00f067aa0ba902b7-01"})
    read_until(response, lambda m: isinstance(m, dict) and m.get("method") == "notifications/progress")
    assert client.notify("notifications/cancelled", {"requestId": 52}).status_code == 202
    read_until(response, lambda m: False)  # ends without an answer
    response.close()
    [call] = finished("tools/call stepped")
    [run] = finished("durable stepped")
    assert call.context is not None and format(call.context.trace_id, "032x") == client_trace
    assert run.context is not None and run.context.trace_id == call.context.trace_id
    assert run.attributes is not None and run.attributes["error.type"] == "cancelled"
    assert run.status.status_code == trace.StatusCode.ERROR
