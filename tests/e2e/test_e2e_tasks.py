"""Tasks under real gunicorn (2 gthread workers) on the backends shared between
processes (a SQLite file, Redis): a task created through one worker is read,
answered and cancelled through the other, while its tool runs in the worker
that accepted it. Requests reach a chosen worker on pinned connections (see
tests/e2e/test_e2e_streaming.py). Loopback only; servers are stopped by their PID.
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import GunicornServer, backend_uri, validate_message
from test_e2e_streaming import BACKENDS, MODERN, MODERN_META, Cluster, PinnedConnection, pin, warm_up

from flask_mcp.backends.sqlite import SqliteTaskStore

pytestmark = pytest.mark.e2e

TASKS = "io.modelcontextprotocol/tasks"
META = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}}}
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
#: How long a task may take to reach the status a test waits for.
DEADLINE = 10.0


@pytest.fixture(scope="module", params=[(backend, worker) for worker in ("gthread", "gevent") for backend in BACKENDS],
                ids=lambda p: "-".join(p))
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """``gunicorn -w 2`` on each shared backend, with threads and with gevent (a task's
    thread is then a greenlet)."""
    backend, worker_class = request.param
    if worker_class == "gevent" and importlib.util.find_spec("gevent") is None:
        pytest.skip("gevent is not installed (it is in the test extra)")
    folder = tmp_path_factory.mktemp(backend)
    env = {"FLASK_MCP_BACKEND": backend_uri(backend, folder), "FLASK_MCP_TASK_POLL_INTERVAL_MS": "100"}
    server = GunicornServer("tests.tasks_app:app", workers=2, threads=8, env=env, worker_class=worker_class)
    try:
        yield Cluster(server, folder, warm_up(server))
    finally:
        server.stop()


def call(connection: PinnedConnection, method: str, params: dict[str, Any], request_id: str) -> dict[str, Any]:
    """One 2026-07-28 request declaring the tasks extension; the JSON-RPC answer (schema-checked)."""
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    headers = {**HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": str(name)}
    body = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}
    status, content_type, raw = connection.post(body, headers)
    assert status == 200 and content_type.startswith("application/json"), (status, raw[:500])
    message: dict[str, Any] = json.loads(raw)
    validate_message(MODERN, method, message)
    assert "result" in message, message
    result: dict[str, Any] = message["result"]
    return result


def wait_for(connection: PinnedConnection, task_id: str, statuses: set[str]) -> dict[str, Any]:
    until = time.monotonic() + DEADLINE
    n = 0
    while True:
        n += 1
        task = call(connection, "tasks/get", {"taskId": task_id}, f"get-{task_id}-{n}")
        if task["status"] in statuses:
            return task
        assert time.monotonic() < until, f"task {task_id} stayed {task['status']}"
        time.sleep(0.05)


def two_workers(cluster: Cluster) -> tuple[PinnedConnection, PinnedConnection]:
    first = pin(cluster, lambda pid: True, "any worker")
    other = pin(cluster, lambda pid: pid != first.pid, "the other worker")
    return first, other


def test_a_task_accepted_by_one_worker_is_read_answered_and_finished_through_the_other(cluster: Cluster) -> None:
    accepting, other = two_workers(cluster)
    try:
        created = call(accepting, "tools/call", {"name": "tasked_question", "arguments": {}}, "create-question")
        assert created["resultType"] == "task" and created["status"] == "working"
        task_id = created["taskId"]
        # Durable before the answer: the other worker knows the task at once.
        assert call(other, "tasks/get", {"taskId": task_id}, "get-at-once")["taskId"] == task_id
        waiting = wait_for(other, task_id, {"input_required"})
        assert waiting["statusMessage"] == f"running in {accepting.pid}"
        (key,) = waiting["inputRequests"]
        assert waiting["inputRequests"][key]["method"] == "elicitation/create"
        ack = call(other, "tasks/update", {"taskId": task_id, "inputResponses": {
            key: {"action": "accept", "content": {"name": "Ada"}}}}, "update")
        assert ack["resultType"] == "complete" and "status" not in ack
        done = wait_for(other, task_id, {"completed", "failed", "cancelled"})
        assert done["status"] == "completed", done
        assert done["result"]["structuredContent"] == {"greeting": "Hello, Ada!", "pid": accepting.pid}
    finally:
        accepting.close()
        other.close()
    assert "Traceback" not in cluster.server.output()


def test_a_cancel_sent_to_the_other_worker_stops_the_tool_in_the_first(cluster: Cluster) -> None:
    accepting, other = two_workers(cluster)
    try:
        created = call(accepting, "tools/call", {"name": "tasked", "arguments": {"seconds": 60}}, "create-long")
        task_id = created["taskId"]
        running = wait_for(other, task_id, {"working"})
        until = time.monotonic() + DEADLINE
        while running.get("statusMessage") != f"running in {accepting.pid}":  # the tool has begun
            assert time.monotonic() < until
            running = call(other, "tasks/get", {"taskId": task_id}, f"get-running-{time.monotonic()}")
        ack = call(other, "tasks/cancel", {"taskId": task_id}, "cancel")
        assert ack["resultType"] == "complete" and "status" not in ack
        started = time.monotonic()
        ended = wait_for(accepting, task_id, {"completed", "failed", "cancelled"})
        assert ended["status"] == "cancelled", ended
        assert time.monotonic() - started < 5, "the tool did not notice the cancellation promptly"
        assert "result" not in ended
        # Cancelling an ended task is acknowledged the same way, on either worker.
        assert call(accepting, "tasks/cancel", {"taskId": task_id}, "cancel-again")["resultType"] == "complete"
    finally:
        accepting.close()
        other.close()


def test_a_task_that_finishes_is_kept_for_its_ttl_and_reads_the_same_on_both_workers(cluster: Cluster) -> None:
    accepting, other = two_workers(cluster)
    try:
        created = call(accepting, "tools/call", {"name": "tasked", "arguments": {"seconds": 0}}, "create-short")
        assert created["ttlMs"] == 3_600_000 and created["pollIntervalMs"] == 100
        done = wait_for(other, created["taskId"], {"completed"})
        again = call(accepting, "tasks/get", {"taskId": created["taskId"]}, "get-on-first")
        strip = ("_meta",)
        assert {k: v for k, v in done.items() if k not in strip} == {k: v for k, v in again.items() if k not in strip}
        assert done["result"]["structuredContent"]["pid"] == accepting.pid
    finally:
        accepting.close()
        other.close()



def test_a_task_whose_worker_stops_is_failed_not_left_working(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("stopping")
    database = folder / "tasks.sqlite3"
    server = GunicornServer("tests.tasks_app:app", workers=1, threads=4,
                            env={"FLASK_MCP_BACKEND": f"sqlite:///{database}"})
    try:
        connection = PinnedConnection(http.client.HTTPConnection("127.0.0.1", server.port, timeout=10))
        task_id = call(connection, "tools/call", {"name": "tasked", "arguments": {"seconds": 60}}, "doomed")["taskId"]
        wait_for(connection, task_id, {"working"})
        connection.close()
    finally:
        server.stop()  # SIGTERM: the worker exits gracefully, its task threads with it
    record = SqliteTaskStore(str(database)).get(task_id)
    assert record is not None and record.status == "failed", record
    assert record.error is not None and "stopped" in record.error["message"]

