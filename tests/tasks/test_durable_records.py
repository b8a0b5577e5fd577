"""Durable calls as operators see them (``flask mcp sessions``): the web worker
keeps a task record as it queues the call, a real Celery worker (in this
process, on kombu's in-memory broker) updates it as the call runs and ends it
with the call. The record is never a client's MCP task."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.protocol.task_records import CANCELLED, COMPLETED, FAILED, TaskRecord
from flask_mcp.testing import MCPTestClient, parse_sse

celery = pytest.importorskip("celery")
from celery.signals import task_prerun  # noqa: E402
from celery_in_process import app_without_a_queue, celery_worker, memory_celery_app  # noqa: E402

LEGACY = "2025-11-25"
TASKS = "io.modelcontextprotocol/tasks"


def build_app() -> Flask:
    app = memory_celery_app(__name__)
    mcp = MCP(app, name="durable-records", version="1.0")
    app.extensions["test-release"] = release = threading.Event()

    @mcp.tool(durable=True)
    def halfway(ctx: Context) -> str:
        """Says how far it got, then waits until released or cancelled."""
        ctx.report_progress(1, 2, "Half way there")
        while not release.wait(0.02):
            ctx.check_cancelled()
        return "released"

    @mcp.tool(task="optional", durable=False)
    def local() -> str:
        """Makes the server offer the tasks extension to 2026-07-28 clients."""
        return "here"

    return app


@pytest.fixture(scope="module")
def records_app() -> Iterator[Flask]:
    app = build_app()
    with celery_worker(app):
        yield app


@pytest.fixture
def client(make_client: Callable[..., MCPTestClient], records_app: Flask) -> Iterator[MCPTestClient]:
    release = records_app.extensions["test-release"]
    release.clear()
    yield connect(make_client, records_app, LEGACY)
    release.set()  # a call a failed test left running ends


def post(client: MCPTestClient, name: str, request_id: int) -> Any:
    params = {"name": name, "arguments": {}, "_meta": {"progressToken": "p"}}
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               **client.extra_headers, **client.standard_headers("tools/call", params)}
    return client.client.post(client.url, data=json.dumps(body), headers=headers, buffered=False)


def running(app: Flask) -> list[TaskRecord]:
    records: list[TaskRecord] = app.extensions["mcp"].backend.tasks.unfinished(10)
    return records


def await_record(app: Flask, check: Callable[[TaskRecord], bool], task_id: str | None = None) -> TaskRecord:
    """The record (of ``task_id``, else the one running) once ``check`` holds, within 10 s."""
    store = app.extensions["mcp"].backend.tasks
    deadline = time.monotonic() + 10
    while True:
        found = [store.get(task_id)] if task_id else running(app)
        if len(found) == 1 and found[0] is not None and check(found[0]):
            return found[0]
        assert time.monotonic() < deadline, found
        time.sleep(0.02)


def first_result(response: Any) -> dict[str, Any] | None:
    """The stream's answer (``None`` if it ended without one)."""
    for chunk in parse_sse(b"".join(response.iter_encoded())):
        message = json.loads(chunk) if chunk else None
        if isinstance(message, dict) and "result" in message:
            return message
    return None


def test_a_durable_call_is_listed_while_it_runs_and_no_more_once_it_ended(
    client: MCPTestClient, records_app: Flask
) -> None:
    celery_ids: list[str] = []

    def seen(task_id: str, **_: Any) -> None:
        celery_ids.append(task_id)

    task_prerun.connect(seen, weak=False)
    try:
        response = post(client, "halfway", 41)
        record = await_record(records_app, lambda r: r.status_message == "Half way there")
    finally:
        task_prerun.disconnect(seen)
    assert record.durable and record.tool == "halfway" and record.session_id == client.session_id
    assert record.status == "working" and record.runs == 1 and not record.queued
    assert record.queue_id is not None and celery_ids == [record.queue_id]  # the Celery task id of its message
    assert record.stream_id is not None and record.ttl_ms is not None  # expires like any task record

    result = records_app.test_cli_runner().invoke(args=["mcp", "sessions", "--json"])
    assert result.exit_code == 0, result.output
    [listed] = json.loads(result.output)["running"]["tasks"]
    assert listed["task_id"] == record.task_id and listed["durable"] is True
    assert listed["stream_id"] == record.stream_id and listed["celery_task_id"] == record.queue_id
    text = records_app.test_cli_runner().invoke(args=["mcp", "sessions"]).output
    assert f"durable call, stream {record.stream_id}" in text and "Half way there" in text

    records_app.extensions["test-release"].set()
    answer = first_result(response)
    response.close()
    assert answer is not None and answer["result"]["content"][0]["text"] == "released"
    ended = await_record(records_app, lambda r: r.terminal, record.task_id)
    assert ended.status == COMPLETED
    assert running(records_app) == []


def test_a_durable_call_s_record_is_no_task_a_2026_client_can_see(
    client: MCPTestClient, records_app: Flask, make_client: Callable[..., MCPTestClient]
) -> None:
    response = post(client, "halfway", 42)
    record = await_record(records_app, lambda r: r.runs == 1)
    modern = connect(make_client, records_app, "2026-07-28", capabilities={"extensions": {TASKS: {}}})
    for answer in (modern.get_task(record.task_id), modern.cancel_task(record.task_id),
                   modern.update_task(record.task_id, {})):
        assert answer.error["code"] == -32602 and "Unknown task" in answer.error["message"]
    assert not await_record(records_app, lambda r: True, record.task_id).cancel_requested
    records_app.extensions["test-release"].set()
    assert first_result(response) is not None
    response.close()


def test_a_cancelled_durable_call_s_record_ends_cancelled(client: MCPTestClient, records_app: Flask) -> None:
    response = post(client, "halfway", 43)
    record = await_record(records_app, lambda r: r.runs == 1)
    assert client.notify("notifications/cancelled", {"requestId": 43}).status_code == 202
    assert first_result(response) is None
    response.close()
    assert await_record(records_app, lambda r: r.terminal, record.task_id).status == CANCELLED


def test_a_durable_call_the_queue_cannot_take_leaves_no_running_record(
    make_client: Callable[..., MCPTestClient],
) -> None:
    app = app_without_a_queue(__name__)
    client = connect(make_client, app, LEGACY)
    assert post(client, "slow", 44).status_code == 503
    store = app.extensions["mcp"].backend.tasks
    assert store.unfinished(10) == []
    assert store.count_by_status() == {FAILED: 1}  # kept, and ended at once
