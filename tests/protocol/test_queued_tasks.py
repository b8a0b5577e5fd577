"""Task tools run by a task queue (``MCP_TASK_RUNNER = "celery"``), without the
broker: the web side through Flask's test client, the queue worker's side by
calling ``resume_task`` with the request the Celery message carries (JSON, as
``flask_mcp.tasks.celery`` writes and reads it). Real Celery workers:
tests/e2e/test_e2e_celery.py."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.config import ConfigError
from flask_mcp.protocol.queued_tasks import NOT_REPEATED, TaskQueue
from flask_mcp.protocol.request_info import RequestInfo
from flask_mcp.protocol.task_records import TaskRecord
from flask_mcp.testing import MCPTestClient

pytest.importorskip("flask_mcp.tasks.celery", reason="the celery extra is not installed")
from flask_mcp.tasks import celery as celery_runner  # noqa: E402

WITH_TASKS: dict[str, Any] = {"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}
NAME_SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
DEADLINE = 5.0


class Harness:
    """An app whose task tools go to an in-process queue (a list) instead of Celery."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.release = threading.Event()
        self.asked = threading.Event()
        mcp = MCP(name="queued", version="1.0")

        @mcp.tool(task="optional")
        def count(n: int, ctx: Context) -> dict[str, Any]:
            """Counts the runs."""
            self.ran.append(f"count {n}")
            return {"n": n, "task": ctx.task_id}

        @mcp.tool(task="optional")
        def ask_then_wait(ctx: Context) -> str:
            """Asks a name, then waits for the test (a worker that may die there)."""
            answer = ctx.elicit("Name?", NAME_SCHEMA)
            self.ran.append("asked")
            self.asked.set()
            while not self.release.wait(0.01):
                ctx.check_cancelled()
            return f"Hello, {answer.content['name'] if answer.content else None}!"

        @mcp.tool(task="optional", task_rerun=False)
        def once(ctx: Context) -> str:
            """Not safe to repeat."""
            self.ran.append("once")
            self.asked.set()
            while not self.release.wait(0.01):
                ctx.check_cancelled()
            return "done"

        @mcp.tool(task="optional", task_start="explicit")
        def confirm_first(item: str, ctx: Context) -> str:
            """Asks in the call itself, then continues as a task."""
            answer = ctx.elicit(f"Who approves {item}?", NAME_SCHEMA, key="who")
            ctx.start_task("processing")
            self.ran.append("after start")
            return f"{item} approved by {answer.content['name'] if answer.content else None}"

        self.app = Flask("queued")
        self.app.config.update(SECRET_KEY="s", MCP_BACKEND="memory://", TESTING=True)
        mcp.init_app(self.app)
        self.methods = self.app.extensions["mcp"].server.methods
        self.sent: list[dict[str, Any]] = []
        self.methods.tasks.queue = TaskQueue(self.send)
        self.client = MCPTestClient(self.app, capabilities=WITH_TASKS)

    def send(self, record: TaskRecord, request: RequestInfo, tool: str, arguments: dict[str, Any]) -> None:
        self.sent.append(json.loads(json.dumps(celery_runner.payload(record.task_id, request))))

    def work(self, message: dict[str, Any]) -> str | None:
        """What a Celery worker does with one message."""
        with self.app.app_context():
            return celery_runner.run(message)

    def work_in_background(self, message: dict[str, Any]) -> threading.Thread:
        thread = threading.Thread(target=self.work, args=(message,), daemon=True)
        thread.start()
        return thread

    def start(self, tool: str, arguments: dict[str, Any] | None = None) -> str:
        result = self.client.call_tool(tool, arguments or {}).result
        assert result["resultType"] == "task" and result["status"] == "working"
        task_id: str = result["taskId"]
        return task_id

    def wait_for(self, task_id: str, status: str) -> dict[str, Any]:
        until = time.monotonic() + DEADLINE
        while True:
            task: dict[str, Any] = self.client.get_task(task_id).result
            if task["status"] == status:
                return task
            assert time.monotonic() < until, task
            time.sleep(0.01)


@pytest.fixture
def harness() -> Any:
    built = Harness()
    yield built
    built.release.set()


def test_an_unknown_runner_is_refused_at_init_app() -> None:
    app = Flask("bad")
    app.config.update(MCP_BACKEND="memory://", MCP_TASK_RUNNER="cron")
    with pytest.raises(ConfigError, match="MCP_TASK_RUNNER must be 'thread' or 'celery'"):
        MCP(app)


def test_the_call_is_stored_and_queued_and_the_worker_runs_it(harness: Harness) -> None:
    task_id = harness.start("count", {"n": 3})
    assert harness.ran == []  # the web worker did not run the tool
    (message,) = harness.sent
    assert message["task_id"] == task_id and message["params"]["name"] == "count"
    assert "authorization" not in {k.lower() for k in message["headers"]}
    assert harness.work(message) == "completed"
    task = harness.client.get_task(task_id).result
    assert task["status"] == "completed"
    assert task["result"]["structuredContent"] == {"n": 3, "task": task_id}
    assert harness.ran == ["count 3"]
    assert harness.work(message) is None  # delivered again: nothing to run
    assert harness.ran == ["count 3"]


def test_invalid_arguments_are_refused_before_anything_is_queued(harness: Harness) -> None:
    result = harness.client.call_tool("count", {"n": "three"}).result
    assert result["isError"] is True and "Invalid arguments" in result["content"][0]["text"]
    assert harness.sent == []


def test_a_task_cancelled_while_queued_ends_at_once_and_never_starts(harness: Harness) -> None:
    task_id = harness.start("count", {"n": 1})
    harness.client.cancel_task(task_id)
    task = harness.client.get_task(task_id).result
    assert task["status"] == "cancelled" and task["statusMessage"] == "Cancelled before it started."
    assert harness.work(harness.sent[0]) is None
    assert harness.ran == []


def test_a_running_task_is_cancelled_at_its_next_check(harness: Harness) -> None:
    task_id = harness.start("once")
    thread = harness.work_in_background(harness.sent[0])
    assert harness.asked.wait(DEADLINE)
    harness.client.cancel_task(task_id)
    assert harness.wait_for(task_id, "cancelled")["statusMessage"] == "Cancelled."
    thread.join(DEADLINE)
    assert not thread.is_alive()


def test_a_rerun_gets_the_answers_the_first_run_took(harness: Harness) -> None:
    task_id = harness.start("ask_then_wait")
    first = harness.work_in_background(harness.sent[0])
    task = harness.wait_for(task_id, "input_required")
    (key,) = task["inputRequests"]
    harness.client.update_task(task_id, {key: {"action": "accept", "content": {"name": "Ada"}}})
    assert harness.asked.wait(DEADLINE)
    # The message comes again (its worker died, the broker redelivered it): the tool
    # runs from the top and is not asked the question a second time.
    second = harness.work_in_background(harness.sent[0])
    until = time.monotonic() + DEADLINE
    while harness.ran != ["asked", "asked"]:
        assert time.monotonic() < until, harness.ran
        time.sleep(0.01)
    assert harness.client.get_task(task_id).result["status"] == "working"
    harness.release.set()
    task = harness.wait_for(task_id, "completed")
    assert task["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    first.join(DEADLINE)
    second.join(DEADLINE)


def test_a_tool_not_safe_to_repeat_is_failed_instead_of_run_again(harness: Harness) -> None:
    task_id = harness.start("once")
    first = harness.work_in_background(harness.sent[0])
    assert harness.asked.wait(DEADLINE)
    assert harness.work(harness.sent[0]) == "failed"
    task = harness.client.get_task(task_id).result
    assert task["status"] == "failed" and task["statusMessage"] == NOT_REPEATED
    assert task["error"]["code"] == -32603
    assert harness.ran == ["once"]
    harness.release.set()
    first.join(DEADLINE)
    assert harness.client.get_task(task_id).result["status"] == "failed"  # the first run's end is ignored


def test_a_queue_that_refuses_the_task_fails_it_and_answers_503(harness: Harness) -> None:
    def refuse(record: TaskRecord, request: RequestInfo, tool: str, arguments: dict[str, Any]) -> None:
        raise ConnectionError("broker down")

    harness.methods.tasks.queue = TaskQueue(refuse)
    response = harness.client.call_tool("count", {"n": 1})
    assert response.status_code == 503
    assert response.error["code"] == -32603 and "task queue is unavailable" in response.error["message"]
    assert harness.ran == []


def test_an_explicit_start_tool_asks_in_the_call_then_its_worker_replays_the_answer(harness: Harness) -> None:
    first = harness.client.call_tool("confirm_first", {"item": "invoice"}).result
    assert first["resultType"] == "input_required" and harness.sent == []
    second = harness.client.request("tools/call", {
        "name": "confirm_first", "arguments": {"item": "invoice"},
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
        "requestState": first["requestState"],
    }).result
    assert second["resultType"] == "task" and second["statusMessage"] == "processing"
    assert harness.ran == []  # the web worker stopped at ctx.start_task()
    assert harness.work(harness.sent[0]) == "completed"
    task = harness.client.get_task(second["taskId"]).result
    assert task["result"]["content"] == [{"type": "text", "text": "invoice approved by Ada"}]
    assert harness.ran == ["after start"]


def test_the_worker_s_run_is_a_span_under_the_call_and_is_counted_but_never_abandoned(harness: Harness) -> None:
    """The queue worker's side with the OpenTelemetry SDK: the task span's parent
    is the call's span (from the task's record), the worker's own span for the
    message is linked, the run is counted, and a process exit does not fail it
    (the queue gives it to another worker instead)."""
    pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    harness.app.extensions["mcp"].telemetry.use(provider, MeterProvider(metric_readers=[reader]))
    tasks = harness.methods.tasks
    task_id = harness.start("once")
    (call,) = exporter.get_finished_spans()
    assert call.name == "tools/call once"
    consumer = provider.get_tracer("a Celery instrumentation")

    def consume() -> None:  # under the span such an instrumentation makes for the message
        with consumer.start_as_current_span("run/flask_mcp.run_task"):
            harness.work(harness.sent[0])

    worker = threading.Thread(target=consume, daemon=True)
    worker.start()
    assert harness.asked.wait(DEADLINE)
    assert tasks.running_here() == 1
    assert tasks.abandon_running() == 0  # not this process's thread to fail
    harness.release.set()
    worker.join(DEADLINE)
    assert tasks.running_here() == 0
    (run,) = [span for span in exporter.get_finished_spans() if span.name == "task once"]
    assert run.parent is not None and run.parent.span_id == call.context.span_id
    assert run.context.trace_id == call.context.trace_id
    (message,) = [span for span in exporter.get_finished_spans() if span.name == "run/flask_mcp.run_task"]
    assert [link.context.span_id for link in run.links] == [message.context.span_id]  # linked, not the parent
    assert dict(run.attributes or {}) == {"gen_ai.tool.name": "once", "flask_mcp.task.id": task_id,
                                          "flask_mcp.task.status": "completed", "mcp.method.name": "tools/call",
                                          "mcp.protocol.version": "2026-07-28", "gen_ai.operation.name": "execute_tool",
                                          "jsonrpc.request.id": (call.attributes or {})["jsonrpc.request.id"]}
    data = reader.get_metrics_data()
    assert data is not None
    ended = [point for resource in data.resource_metrics for scope in resource.scope_metrics
             for metric in scope.metrics if metric.name == "flask_mcp.tasks.ended"
             for point in metric.data.data_points]
    assert [(dict(point.attributes or {}), getattr(point, "value", None)) for point in ended] == [
        ({"flask_mcp.task.status": "completed"}, 1)]
