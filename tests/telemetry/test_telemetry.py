"""Spans, metrics and the access log (flask_mcp.telemetry) through Flask's
test client, with the OpenTelemetry SDK's in-memory exporter and reader."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context, ToolError
from flask_mcp.testing import MCPTestClient

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")

from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

MakeClient = Callable[..., MCPTestClient]
TASKS = "io.modelcontextprotocol/tasks"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"

_EXPORTER = InMemorySpanExporter()
_PROVIDER = TracerProvider()
_PROVIDER.add_span_processor(SimpleSpanProcessor(_EXPORTER))
tracer = _PROVIDER.get_tracer("tests")


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The in-memory exporter, emptied for each test. The apps record with
    providers of their own (``Telemetry.use``), never the global ones, so no
    other test module sees tracing on."""
    _EXPORTER.clear()
    yield _EXPORTER


@pytest.fixture
def reader() -> InMemoryMetricReader:
    return InMemoryMetricReader()


def _observe(app: Flask, reader: InMemoryMetricReader) -> None:
    app.extensions["mcp"].telemetry.use(_PROVIDER, MeterProvider(metric_readers=[reader]))


@pytest.fixture
def app(app: Flask, reader: InMemoryMetricReader) -> Flask:
    app.config.update(SECRET_KEY="telemetry-tests", MCP_BACKEND="memory://")
    mcp = MCP(app)
    _observe(app, reader)

    @mcp.tool
    def get_weather(city: str) -> str:
        """The weather, with a span of the tool's own."""
        with tracer.start_as_current_span("lookup"):
            return f"sunny in {city}"

    @mcp.tool
    def broken() -> str:
        """Always fails as a tool error."""
        raise ToolError("the weather service is down")

    @mcp.tool
    def slow(ctx: Context) -> str:
        """Reports progress twice."""
        ctx.report_progress(1, 2)
        ctx.report_progress(2, 2)
        return "done"

    @mcp.tool
    def ask_name(ctx: Context) -> str:
        """Asks the user (elicitation) inside a span of its own."""
        answer = ctx.elicit("Your name?", {"type": "object", "properties": {"name": {"type": "string"}}})
        return f"hello {answer.content}"

    @mcp.tool
    def two_questions(ctx: Context) -> str:
        """Asks twice: on 2026-07-28, three rounds of one call."""
        schema = {"type": "object", "properties": {"name": {"type": "string"}}}
        first = ctx.elicit("First name?", schema)
        second = ctx.elicit("Last name?", schema)
        return f"hello {first.content} {second.content}"

    @mcp.tool(task="optional")
    def background() -> str:
        """Runs as a task when the client asks; its span nests under the call."""
        with tracer.start_as_current_span("background work"):
            return "finished"

    @mcp.tool(task="optional")
    def broken_task(ctx: Context) -> str:
        """Starts its task, then fails as a tool error."""
        ctx.start_task()
        raise ToolError("the weather service is down")

    @mcp.resource("data://report")
    def report() -> str:
        return "all fine"

    @mcp.prompt
    def summarize(text: str) -> str:
        return f"Summarize: {text}"

    return app


def _one(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = [span for span in spans.get_finished_spans() if span.name == name]
    assert len(found) == 1, [span.name for span in spans.get_finished_spans()]
    return found[0]


def _operation_points(reader: InMemoryMetricReader) -> list[Any]:
    data = reader.get_metrics_data()
    points: list[Any] = []
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "mcp.server.operation.duration":
                    assert metric.unit == "s"
                    points.extend(metric.data.data_points)
    return points


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-03-26"])
def test_tool_call_span_and_the_tools_own_span_beneath(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter, reader: InMemoryMetricReader, version: str
) -> None:
    client = connect(make_client, app, version)
    assert client.call_tool("get_weather", {"city": "Oslo"}).result["content"][0]["text"] == "sunny in Oslo"
    span = _one(spans, "tools/call get_weather")
    assert span.kind is SpanKind.SERVER
    attributes = dict(span.attributes or {})
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "get_weather"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == version
    request_id = attributes["jsonrpc.request.id"]
    assert isinstance(request_id, str) and request_id.isdigit()
    assert ("mcp.session.id" in attributes) is (version != "2026-07-28")
    if version != "2026-07-28":
        assert attributes["mcp.session.id"] == client.session_id
    assert "error.type" not in attributes
    assert span.status.status_code is StatusCode.UNSET
    lookup = _one(spans, "lookup")
    assert lookup.parent is not None and lookup.parent.span_id == span.context.span_id
    assert lookup.context.trace_id == span.context.trace_id
    points = _operation_points(reader)
    tool_points = [p for p in points if p.attributes.get("gen_ai.tool.name") == "get_weather"]
    assert tool_points and tool_points[0].count >= 1
    assert "jsonrpc.request.id" not in tool_points[0].attributes  # no high-cardinality keys on the metric


def test_tool_error_result(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter,
                           reader: InMemoryMetricReader) -> None:
    client = connect(make_client, app, "2026-07-28")
    assert client.call_tool("broken").result["isError"] is True
    span = _one(spans, "tools/call broken")
    assert span.attributes is not None and span.attributes["error.type"] == "tool_error"
    assert span.status.status_code is StatusCode.ERROR
    points = [p for p in _operation_points(reader) if p.attributes.get("gen_ai.tool.name") == "broken"]
    assert points and points[0].attributes["error.type"] == "tool_error"


def test_protocol_error_sets_the_code(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter) -> None:
    client = connect(make_client, app, "2025-11-25")
    error = client.call_tool("no_such_tool").error
    span = _one(spans, "tools/call no_such_tool")
    attributes = dict(span.attributes or {})
    assert attributes["error.type"] == str(error["code"])
    assert attributes["rpc.response.status_code"] == str(error["code"])
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == error["message"]


def test_resource_prompt_and_list_spans(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter) -> None:
    client = connect(make_client, app, "2025-06-18")
    client.read_resource("data://report")
    client.get_prompt("summarize", {"text": "x"})
    client.list_tools()
    client.notify("notifications/roots/list_changed")
    read = _one(spans, "resources/read")
    assert read.attributes is not None and read.attributes["mcp.resource.uri"] == "data://report"
    prompt = _one(spans, "prompts/get summarize")
    assert prompt.attributes is not None and prompt.attributes["gen_ai.prompt.name"] == "summarize"
    assert "gen_ai.operation.name" not in prompt.attributes
    assert _one(spans, "tools/list").attributes is not None
    assert _one(spans, "initialize").attributes is not None
    note = _one(spans, "notifications/roots/list_changed")
    assert note.attributes is not None and "jsonrpc.request.id" not in note.attributes
    assert note.attributes["mcp.session.id"] == client.session_id


def test_streamed_call_with_progress(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter) -> None:
    client = connect(make_client, app, "2025-11-25")
    answer = client.call_tool("slow", meta={"progressToken": "p1"})
    assert [n["method"] for n in answer.notifications] == ["notifications/progress"] * 2
    span = _one(spans, "tools/call slow")
    assert span.attributes is not None and "error.type" not in span.attributes


def test_traceparent_in_meta_continues_the_trace(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2026-07-28")
    meta = {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01", "tracestate": "rojo=00f067aa0ba902b7"}
    client.call_tool("get_weather", {"city": "Rome"}, meta=meta)
    span = _one(spans, "tools/call get_weather")
    assert format(span.context.trace_id, "032x") == TRACE_ID
    assert span.parent is not None and format(span.parent.span_id, "016x") == PARENT_ID
    assert span.parent.is_remote
    assert span.context.trace_state.get("rojo") == "00f067aa0ba902b7"


def test_http_traceparent_when_meta_has_none(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter) -> None:
    client = connect(make_client, app, "2025-11-25", headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    client.call_tool("get_weather", {"city": "Bern"})
    span = _one(spans, "tools/call get_weather")
    assert format(span.context.trace_id, "032x") == TRACE_ID


def _app_with_auth(instance_folder: Any, reader: InMemoryMetricReader, tool: str) -> Flask:
    """An observed app that wants a bearer token (any will do) and has one tool, ``tool``."""
    app = Flask("refusing", instance_path=str(instance_folder))
    app.config.update(TESTING=True, MCP_AUTH=True, MCP_TOKEN_VERIFIER="presence",
                      MCP_RESOURCE_URL="http://localhost/mcp")
    mcp = MCP(app)
    _observe(app, reader)
    mcp.add_tool(lambda: "s", name=tool)
    return app


def test_refused_call_has_a_span(instance_folder: Any, make_client: MakeClient, spans: InMemorySpanExporter,
                                reader: InMemoryMetricReader) -> None:
    app = _app_with_auth(instance_folder, reader, "secret")
    client = make_client(app, "2026-07-28")
    response = client.call_tool("secret")
    assert response.status_code == 401
    span = _one(spans, "tools/call secret")
    assert span.attributes is not None and span.attributes["error.type"] == "401"
    assert span.status.status_code is StatusCode.ERROR
    # A refused body that is no MCP message (here nested past the interpreter's
    # recursion limit) is refused all the same, with no span.
    nested = app.test_client().post("/mcp", data="[" * 200_000, content_type="application/json",
                                    headers={"Accept": "application/json, text/event-stream"})
    assert nested.status_code == 401
    assert len(spans.get_finished_spans()) == 1


def test_names_a_client_made_up_stay_off_the_metric(
    instance_folder: Any, make_client: MakeClient, reader: InMemoryMetricReader
) -> None:
    """Spans keep what was asked; the histogram's labels keep only names the
    server knows, or every client could mint new time series at will."""
    app = _app_with_auth(instance_folder, reader, "real")
    refused = make_client(app, "2026-07-28")
    for name in ("made-up-1", "made-up-2"):
        assert refused.call_tool(name).status_code == 401
    allowed = make_client(app, "2026-07-28", headers={"Authorization": "Bearer any"})
    assert allowed.call_tool("made-up-3").error is not None  # no such tool: -32602
    assert allowed.call_tool("real").status_code == 200
    labels = {tuple(p.attributes.get(key) for key in ("mcp.method.name", "gen_ai.tool.name", "error.type"))
              for p in _operation_points(reader)}
    assert {name for _, name, _ in labels} == {"_OTHER", "real"}, labels
    assert ("tools/call", "_OTHER", "401") in labels and ("tools/call", "real", None) in labels


def test_session_duration_on_delete(app: Flask, make_client: MakeClient, reader: InMemoryMetricReader) -> None:
    client = connect(make_client, app, "2025-11-25")
    assert client.delete().status_code == 200
    data = reader.get_metrics_data()
    assert data is not None
    names = {m.name for r in data.resource_metrics for s in r.scope_metrics for m in s.metrics}
    assert "mcp.server.session.duration" in names


def test_access_log(app: Flask, make_client: MakeClient, spans: InMemorySpanExporter,
                    caplog: pytest.LogCaptureFixture) -> None:
    client = connect(make_client, app, "2025-11-25", headers={"Authorization": "Bearer not-logged-token"})
    with caplog.at_level(logging.INFO, logger="flask_mcp.access"):
        client.call_tool("broken")
    records = [r for r in caplog.records if r.name == "flask_mcp.access"]
    assert len(records) == 1
    record: Any = records[0]
    assert (record.mcp_method, record.mcp_target, record.mcp_outcome) == ("tools/call", "broken", "tool_error")
    assert record.mcp_session_id == client.session_id
    assert record.mcp_duration_ms >= 0
    span = _one(spans, "tools/call broken")
    assert record.trace_id == format(span.context.trace_id, "032x")
    assert "not-logged-token" not in repr(vars(record))


def test_off_by_config(instance_folder: Any, make_client: MakeClient, spans: InMemorySpanExporter) -> None:
    app = Flask("quiet", instance_path=str(instance_folder))
    app.config.update(TESTING=True, MCP_TELEMETRY=False)
    mcp = MCP(app)

    @mcp.tool
    def hello() -> str:
        return "hi"

    connect(make_client, app, "2026-07-28").call_tool("hello")
    assert spans.get_finished_spans() == ()
    assert app.extensions["mcp"].server.observer is None


def _trace_of(meta: dict[str, Any]) -> str:
    return str(meta["traceparent"].split("-")[1])


def test_a_legacy_elicitation_carries_the_trace_to_the_client(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2025-11-25", capabilities={"elicitation": {}})
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)  # an instrumented client answers in the trace it was handed
        return {"action": "accept", "content": {"name": "Ada"},
                "_meta": {"traceparent": request["params"]["_meta"]["traceparent"]}}

    client.on_request = answer
    assert "Ada" in client.call_tool("ask_name").result["content"][0]["text"]
    span = _one(spans, "tools/call ask_name")
    assert [r["method"] for r in asked] == ["elicitation/create"]
    assert _trace_of(asked[0]["params"]["_meta"]) == format(span.context.trace_id, "032x")
    response = _one(spans, "response")
    assert response.context.trace_id == span.context.trace_id
    attributes = dict(response.attributes or {})
    assert attributes["jsonrpc.request.id"] == asked[0]["id"]
    assert attributes["mcp.session.id"] == client.session_id
    assert "mcp.method.name" not in attributes


def test_input_required_requests_carry_the_trace(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2026-07-28", capabilities={"elicitation": {}})
    result = client.call_tool("ask_name").result
    assert result["resultType"] == "input_required"
    span = _one(spans, "tools/call ask_name")
    (question,) = result["inputRequests"].values()
    assert _trace_of(question["params"]["_meta"]) == format(span.context.trace_id, "032x")


def _await_span(spans: InMemorySpanExporter, name: str) -> None:
    """Return once a span called ``name`` has ended (a task's ends after its call's answer)."""
    deadline = time.monotonic() + 10
    while not [s for s in spans.get_finished_spans() if s.name == name]:
        assert time.monotonic() < deadline, f"the span {name!r} never ended"
        time.sleep(0.01)


def test_a_task_runs_under_the_call_that_started_it(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    created = client.call_tool("background").result
    assert "taskId" in created
    _await_span(spans, "task background")
    call = _one(spans, "tools/call background")
    run = _one(spans, "task background")
    work = _one(spans, "background work")
    assert run.kind is SpanKind.INTERNAL
    assert run.parent is not None and run.parent.span_id == call.context.span_id
    assert work.parent is not None and work.parent.span_id == run.context.span_id
    attributes = dict(run.attributes or {})
    assert attributes["flask_mcp.task.id"] == created["taskId"]
    assert attributes["flask_mcp.task.status"] == "completed"
    assert attributes["gen_ai.tool.name"] == "background"
    assert run.status.status_code is StatusCode.UNSET
    # tasks/get: a span in the client's trace, linked to the call that created the task
    client.get_task(created["taskId"])
    get = _one(spans, "tasks/get")
    assert get.attributes is not None and get.attributes["flask_mcp.task.id"] == created["taskId"]
    (link,) = get.links
    assert link.context.span_id == call.context.span_id
    assert link.attributes is not None and link.attributes["flask_mcp.task_call"] is True


def test_a_failing_task_s_span_has_the_error(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    created = client.call_tool("broken_task").result
    assert "taskId" in created
    _await_span(spans, "task broken_task")
    run = _one(spans, "task broken_task")
    assert run.attributes is not None and run.attributes["error.type"] == "tool_error"
    assert run.status.status_code is StatusCode.ERROR

def _rounds(client: MCPTestClient, meta: dict[str, Any] | None) -> dict[str, Any]:
    """The three rounds of ``two_questions``, each with ``meta`` in its ``_meta``."""
    result = client.call_tool("two_questions", meta=meta).result
    for answer in ("Ada", "Lovelace"):
        assert result["resultType"] == "input_required", result
        (key,) = result["inputRequests"]
        result = client.request("tools/call", {
            "name": "two_questions", "requestState": result["requestState"],
            "inputResponses": {key: {"action": "accept", "content": {"name": answer}}}}, meta=meta).result
    return result


def test_the_rounds_of_a_call_without_trace_context_continue_the_first_rounds_trace(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    """A retry that brings no trace context (no ``_meta``, no header) is a child of
    the first round's span, sealed in ``requestState``: one call, one trace."""
    client = connect(make_client, app, "2026-07-28", capabilities={"elicitation": {}})
    assert "Ada" in _rounds(client, None)["content"][0]["text"]
    first, second, third = sorted((s for s in spans.get_finished_spans() if s.name == "tools/call two_questions"),
                                  key=lambda s: s.start_time or 0)
    assert first.parent is None
    for retry in (second, third):
        assert retry.context.trace_id == first.context.trace_id
        assert retry.parent is not None and retry.parent.span_id == first.context.span_id  # the first, not the last
        assert retry.links == ()


def test_the_rounds_of_a_call_with_its_own_trace_context_link_the_first_round(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    """A retry with its own ``traceparent`` keeps it as parent (the client's
    trace is not broken) and links the first round's span."""
    client = connect(make_client, app, "2026-07-28", capabilities={"elicitation": {}})
    _rounds(client, {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    first, second, third = sorted((s for s in spans.get_finished_spans() if s.name == "tools/call two_questions"),
                                  key=lambda s: s.start_time or 0)
    assert first.links == ()
    for retry in (second, third):
        assert retry.parent is not None and format(retry.parent.span_id, "016x") == PARENT_ID
        (link,) = retry.links
        assert link.context.span_id == first.context.span_id and link.context.trace_id == first.context.trace_id
        assert link.attributes is not None and link.attributes["flask_mcp.first_round"] is True


def test_a_forged_request_state_links_nothing(
    app: Flask, make_client: MakeClient, spans: InMemorySpanExporter
) -> None:
    client = connect(make_client, app, "2026-07-28", capabilities={"elicitation": {}})
    state = client.call_tool("two_questions").result["requestState"]
    body, mac = state.rsplit(".", 1)
    forged = client.request("tools/call", {"name": "two_questions", "requestState": f"{body}.{'0' * len(mac)}"})
    assert forged.error is not None and forged.error["code"] == -32602
    second = sorted((s for s in spans.get_finished_spans() if s.name == "tools/call two_questions"),
                    key=lambda s: s.start_time or 0)[1]
    assert second.parent is None and second.links == ()


def test_a_forked_process_looks_for_its_providers_at_its_first_check() -> None:
    """A gunicorn or Celery pool process sets its providers just after the fork:
    it must not wait for the parent's next lookup (up to a second) to use them."""
    import os

    from opentelemetry import metrics, trace

    from flask_mcp.telemetry.otel import Instruments

    instruments = Instruments("1.0")
    instruments.own_tracer_provider = trace.NoOpTracerProvider()  # no SDK, whatever the global one
    instruments.own_meter_provider = metrics.NoOpMeterProvider()
    assert not instruments.active()  # looked up now
    instruments.next_look = time.monotonic() + 3600  # the next lookup far away (a second, really)
    instruments.own_tracer_provider = TracerProvider()
    child = os.fork()
    if child == 0:  # the child: the new provider at its first check
        os._exit(0 if instruments.active() else 1)
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert not instruments.active()  # the parent keeps its lookup interval
