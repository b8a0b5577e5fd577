"""One trace for a call, wherever its parts run (in one process, with the
OpenTelemetry SDK's in-memory exporter): the Celery message of a task carries
the web worker's trace context and the run continues it; a stream picked up
again with ``GET`` + ``Last-Event-ID`` gets a span in the trace of the call
that opened it. Across real processes: tests/e2e/test_e2e_celery_ops.py."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.protocol.task_records import TaskRecord
from flask_mcp.testing import MCPTestClient

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")
pytest.importorskip("celery", reason="Celery (pip install 'flask-mcp[celery]')")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind  # noqa: E402

MakeClient = Callable[..., MCPTestClient]
TASKS = "io.modelcontextprotocol/tasks"
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _EXPORTER.clear()
    yield _EXPORTER


def _await(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    deadline = time.monotonic() + 10
    while True:
        found = [span for span in spans.get_finished_spans() if span.name == name]
        if found:
            assert len(found) == 1, [span.name for span in spans.get_finished_spans()]
            return found[0]
        assert time.monotonic() < deadline, f"no span {name!r}: {[s.name for s in spans.get_finished_spans()]}"
        time.sleep(0.01)


# ---------------------------------------------------------------------- a task's Celery message


def test_the_celery_message_carries_the_trace_and_the_run_continues_it(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    """The message goes through Celery's real producer to kombu's in-memory
    broker; the test takes it off the queue as a worker would and runs it
    with the worker's entry point. The record's copy of the context is wiped
    first: the run's parent comes from the message."""
    from celery import Celery

    from flask_mcp.tasks import celery as celery_runner

    app.config.update(SECRET_KEY="trace-tests", MCP_BACKEND="memory://", MCP_TASK_RUNNER="celery")
    celery = Celery("trace-tests", broker="memory://", set_as_current=False)
    app.extensions["celery"] = celery
    mcp = MCP(app)
    app.extensions["mcp"].telemetry.use(_PROVIDER)

    @mcp.tool(task="required")
    def report(ctx: Context) -> str:
        return "ready"

    client = connect(make_client, app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    meta = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"}
    created = client.call_tool("report", meta=meta).result
    call = _await(spans, "tools/call report")
    with celery.connection_for_read() as connection:
        queue = connection.SimpleQueue("celery")
        received = queue.get(timeout=5)
        received.ack()
        queue.close()
    assert received.headers["task"] == "flask_mcp.run_task"
    store = app.extensions["mcp"].backend.tasks
    record = store.get(created["taskId"])
    assert received.headers["id"] == record.queue_id  # the Celery task id the record names
    (message,), _, _ = received.decode()
    traceparent = f"00-{TRACE_ID}-{format(call.context.span_id, '016x')}-01"
    assert message["trace_context"] == {"traceparent": traceparent}  # the web worker's span

    def forget(stored: TaskRecord) -> bool:
        stored.carried = None
        return True

    store.update(created["taskId"], forget)
    with app.app_context():
        assert celery_runner.run(message) == "completed"
    run = _await(spans, "task report")
    assert run.kind is SpanKind.INTERNAL
    assert run.context.trace_id == call.context.trace_id == int(TRACE_ID, 16)
    assert run.parent is not None and run.parent.span_id == call.context.span_id
    attributes = dict(run.attributes or {})
    web = dict(call.attributes or {})
    for key in ("mcp.method.name", "mcp.protocol.version", "gen_ai.tool.name", "gen_ai.operation.name",
                "jsonrpc.request.id"):
        assert attributes[key] == web[key], key
    assert attributes["flask_mcp.task.id"] == created["taskId"]
    assert attributes["flask_mcp.task.status"] == "completed"
    assert "network.transport" not in attributes  # the worker has no connection to the client


def test_a_message_without_a_trace_context_still_runs(app: Flask) -> None:
    """Messages queued by a web worker that traced nothing (or by an older
    flask-mcp) carry none: the worker reads ``None``, not an error."""
    from flask_mcp.tasks.celery import request_from

    base = {"version": "2025-11-25", "method": "tools/call", "params": {"name": "x"}, "headers": {}}
    assert request_from(base).carried is None
    assert request_from({**base, "trace_context": None}).carried is None
    assert request_from({**base, "trace_context": {"traceparent": 7}}).carried is None  # not a context
    carried = {"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01", "tracestate": "k=v", "junk": 1}
    assert request_from({**base, "trace_context": carried}).carried == {
        "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01", "tracestate": "k=v"}


# ---------------------------------------------------------------------- a resumed stream


@pytest.fixture
def resumable(app: Flask) -> Flask:
    app.config.update(MCP_BACKEND="memory://")
    mcp = MCP(app)
    app.extensions["mcp"].telemetry.use(_PROVIDER)

    @mcp.tool
    def hand_off(ctx: Context) -> str:
        """Logs, lets the connection go (the client resumes with GET), logs again, answers."""
        ctx.info("before")
        closed = ctx.close_stream(retry_ms=10)
        ctx.info("after")
        return f"closed={closed}"

    return app


def _legacy_client(make_client: MakeClient, app: Flask) -> MCPTestClient:
    client = connect(make_client, app, "2025-11-25", capabilities={"elicitation": {}})
    assert client.request("logging/setLevel", {"level": "info"}).status_code == 200
    return client


def test_a_resumed_stream_s_span_is_a_child_of_the_call_that_opened_it(
    resumable: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = _legacy_client(make_client, resumable)
    response = client.call_tool("hand_off", meta={"traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"})
    assert response.resumptions == 1
    call = _await(spans, "tools/call hand_off")
    resumed = _await(spans, "resume")
    assert resumed.kind is SpanKind.SERVER
    assert resumed.context.trace_id == call.context.trace_id == int(TRACE_ID, 16)
    assert resumed.parent is not None and resumed.parent.span_id == call.context.span_id
    assert not resumed.links
    attributes = dict(resumed.attributes or {})
    assert attributes["mcp.session.id"] == client.session_id
    assert attributes["mcp.protocol.version"] == "2025-11-25"
    assert str(attributes["flask_mcp.stream.last_event_id"]).endswith("/1")  # after "before"
    assert attributes["flask_mcp.stream.events"] == 2  # "after", then the result
    assert "mcp.method.name" not in attributes  # a GET: no MCP method


def test_a_resume_with_a_context_of_its_own_links_it_and_stays_in_the_call_s_trace(
    resumable: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = _legacy_client(make_client, resumable)
    response = client.call_tool("hand_off")  # no context from the client: the call starts the trace
    call = _await(spans, "tools/call hand_off")
    stream_id = _stream_id(response.http.data)
    spans.clear()
    own_trace, own_span = "11111111111111111111111111111111", "2222222222222222"
    replay = client.client.get(client.url, headers={
        "Accept": "text/event-stream", "Last-Event-ID": f"{stream_id}/0", "Mcp-Session-Id": client.session_id or "",
        "MCP-Protocol-Version": "2025-11-25", "traceparent": f"00-{own_trace}-{own_span}-01"})
    assert replay.status_code == 200 and b"closed=True" in replay.data
    resumed = _await(spans, "resume")
    assert resumed.context.trace_id == call.context.trace_id
    assert resumed.parent is not None and resumed.parent.span_id == call.context.span_id
    (link,) = resumed.links
    assert format(link.context.trace_id, "032x") == own_trace and format(link.context.span_id, "016x") == own_span
    assert dict(resumed.attributes or {})["flask_mcp.stream.events"] == 3  # before, after, the result


def test_a_stream_opened_without_tracing_resumes_in_the_get_s_own_trace(
    resumable: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    telemetry = resumable.extensions["mcp"].telemetry
    instruments, telemetry.otel = telemetry.otel, None  # as without opentelemetry-api: the stream keeps no context
    try:
        client = _legacy_client(make_client, resumable)
        response = client.call_tool("hand_off")
    finally:
        telemetry.otel = instruments
    stream_id = _stream_id(response.http.data)
    replay = client.client.get(client.url, headers={
        "Accept": "text/event-stream", "Last-Event-ID": f"{stream_id}/0", "Mcp-Session-Id": client.session_id or "",
        "MCP-Protocol-Version": "2025-11-25", "traceparent": f"00-{TRACE_ID}-{CLIENT_SPAN}-01"})
    assert replay.status_code == 200 and b"closed=True" in replay.data  # read: the span ends with the stream
    resumed = _await(spans, "resume")
    assert resumed.parent is not None and format(resumed.parent.span_id, "016x") == CLIENT_SPAN
    assert not resumed.links


def _stream_id(body: bytes) -> str:
    for line in body.replace(b"\r\n", b"\n").split(b"\n"):
        if line.startswith(b"id:"):
            return line[3:].strip().decode().partition("/")[0]
    raise AssertionError(f"no event id in {body!r}")
