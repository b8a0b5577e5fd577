"""Operating task tools on Celery with real processes on loopback, all started
here and stopped by their PID: a redis-server of our own (broker and task
store) and one ``celery worker`` (tests/celery_app.py). ``flask mcp check``
names the worker and the task it registered; ``flask mcp sessions`` lists a
task while it runs on that worker, with its Celery task id, and a 2025 session's
durable call too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, free_port
from redis_server import start_redis_server, stop_redis_server
from test_e2e_celery import Worker, needs_celery_and_redis

pytestmark = pytest.mark.e2e

TASKS = "io.modelcontextprotocol/tasks"


class OneWorker:
    """redis-server + one Celery worker ``ops``; the commands run as ``flask --app tests.celery_app``."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-celery-ops-"))
        port = free_port()
        self.redis = start_redis_server(port)
        self.url = f"redis://127.0.0.1:{port}/0"
        self.env = {**os.environ, "CELERY_BROKER_URL": self.url, "FLASK_MCP_BACKEND": self.url,
                    "FLASK_MCP_TASK_POLL_INTERVAL_MS": "100"}
        try:
            # two pool processes: a durable call runs while the first test's task still does
            self.worker = Worker("ops", self.env, self.folder, "tests.celery_app", concurrency=2)
        except BaseException:
            self.stop()
            raise

    def flask(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "flask", "--app", "tests.celery_app", "mcp", *args],
                              cwd=ROOT, env=self.env, capture_output=True, text=True, timeout=60)

    def stop(self) -> None:
        if hasattr(self, "worker"):
            self.worker.kill()  # its task may still run: a warm shutdown would wait for it
        stop_redis_server(self.redis)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="module")
def ops() -> Iterator[OneWorker]:
    needs_celery_and_redis()
    stack = OneWorker()
    try:
        yield stack
    finally:
        stack.stop()


def test_check_names_the_celery_worker_and_the_task_it_registered(ops: OneWorker) -> None:
    done = ops.flask("check", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    findings = [(f["status"], f["detail"]) for f in json.loads(done.stdout)["findings"] if f["topic"] == "task queue"]
    assert findings[0][0] == "ok" and findings[0][1].startswith(f"Celery broker {ops.url} reachable (")
    assert findings[1][0] == "ok" and findings[1][1].startswith("1 Celery worker answered: ops@")
    assert findings[2][0] == "ok" and findings[2][1].startswith("flask_mcp.run_task registered on ops@")
    assert len(findings) == 3


def test_sessions_lists_a_task_running_on_the_celery_worker(ops: OneWorker) -> None:
    """The call goes through the app in a process of its own (Flask's test
    client): it stores the task and queues it on the real broker, and the real
    worker runs it."""
    script = (
        "import json, sys\n"
        "from tests.celery_app import app\n"
        "from flask_mcp.testing import MCPTestClient\n"
        f"client = MCPTestClient(app, protocol_version='2026-07-28',\n"
        f"                       capabilities={{'extensions': {{{TASKS!r}: {{}}}}}})\n"
        "print(json.dumps(client.call_tool('tasked', {'seconds': 60}).result))\n"
    )
    started = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ops.env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    task_id = json.loads(started.stdout.strip().splitlines()[-1])["taskId"]
    deadline = time.monotonic() + 30
    while True:
        report = json.loads(ops.flask("sessions", "--json").stdout)
        running: list[dict[str, Any]] = report["running"]["tasks"]
        if running and running[0]["status_message"] == "running on ops":
            break
        assert time.monotonic() < deadline, report
        time.sleep(0.2)
    print(f"listed as running on the worker {time.monotonic() - deadline + 30:.1f} s after the call")
    (task,) = running
    assert task["task_id"] == task_id and task["tool"] == "tasked" and task["status"] == "working"
    assert task["queued"] is False and task["runs"] == 1
    assert task["celery_task_id"] and task["celery_task_id"] in ops.worker.output()  # the id Celery logged
    line = next(line for line in ops.flask("sessions").stdout.splitlines() if task_id in line)
    assert f"on Celery (task {task['celery_task_id']}, run 1)" in line


def test_sessions_lists_a_durable_call_running_on_the_celery_worker(ops: OneWorker) -> None:
    """A 2025-11-25 session's durable call, made in a process of its own that
    leaves once the first progress arrived: the call goes on on the worker, and
    its record (in Redis) is listed with its progress until it ends."""
    script = (
        "import json\n"
        "from tests.celery_app import app\n"
        "from flask_mcp.testing import MCPTestClient\n"
        "client = MCPTestClient(app, protocol_version='2025-11-25')\n"
        "client.initialize()\n"
        "arguments = {'steps': 6, 'interval': 1.0}\n"
        "params = {'name': 'durable_steps', 'arguments': arguments, '_meta': {'progressToken': 1}}\n"
        "body = {'jsonrpc': '2.0', 'id': 5, 'method': 'tools/call', 'params': params}\n"
        "headers = {'Accept': 'application/json, text/event-stream', 'Content-Type': 'application/json',\n"
        "           **client.extra_headers, **client.standard_headers('tools/call', params)}\n"
        "response = client.client.post(client.url, data=json.dumps(body), headers=headers, buffered=False)\n"
        "next(chunk for chunk in response.iter_encoded() if b'notifications/progress' in chunk)\n"
        "response.close()\n"
        "print(json.dumps({'session': client.session_id}))\n"
    )
    started = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=ops.env, capture_output=True, text=True,
                             timeout=60)
    assert started.returncode == 0, started.stderr
    session_id = json.loads(started.stdout.strip().splitlines()[-1])["session"]
    deadline = time.monotonic() + 30
    while True:
        report = json.loads(ops.flask("sessions", "--json").stdout)
        durable = [t for t in report["running"]["tasks"] if t["durable"]]
        if durable and durable[0]["status_message"] and durable[0]["status_message"] != "1/6":
            break
        assert time.monotonic() < deadline, report
        time.sleep(0.2)
    (call,) = durable
    assert call["tool"] == "durable_steps" and call["session_id"] == session_id and call["status"] == "working"
    assert call["queued"] is False and call["runs"] == 1 and call["stream_id"]
    assert call["status_message"].endswith("/6")  # the latest progress, written by the worker
    assert call["celery_task_id"] and call["celery_task_id"] in ops.worker.output()  # the id Celery logged
    line = next(line for line in ops.flask("sessions").stdout.splitlines() if call["task_id"] in line)
    assert f"durable call, stream {call['stream_id']}" in line
    while any(t["task_id"] == call["task_id"] for t in json.loads(ops.flask("sessions", "--json").stdout)
              ["running"]["tasks"]):  # gone once the call ended
        assert time.monotonic() < deadline + 30, "the durable call is still listed"
        time.sleep(0.5)
