"""Task tools on Celery (``MCP_TASK_RUNNER = "celery"``) with real processes on
loopback, all started here and stopped by their PID: a redis-server of our own
(broker and task store), gunicorn (2 workers) and two ``celery worker``
processes (``a`` and ``b``, one task at a time each). A task completes; one
answers a question; one is cancelled while running and one while queued; a
worker SIGKILLed mid-task leaves its task to the other, which runs it again
(or fails it, for a tool that is not safe to repeat); tasks complete while
gunicorn restarts; the conformance suite's task scenarios pass on Celery; with
the OpenTelemetry SDK in every process, a task's span on its Celery worker
continues the trace of the call that created it, and the worker counts it.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from conftest import ROOT, GunicornServer, free_port, unavailable, validate_message

pytestmark = pytest.mark.e2e

MODERN = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {TASKS: {}}},
    "io.modelcontextprotocol/clientInfo": {"name": "celery-e2e", "version": "1"},
}
#: How long a task may take to reach the status a test waits for (a worker's
#: death is noticed after the broker's visibility timeout).
DEADLINE = 40.0
VISIBILITY_TIMEOUT = 5


class Worker:
    """A ``celery worker`` we started (its own process group, so its pool dies with it)."""

    def __init__(self, name: str, env: dict[str, str], folder: Path, module: str, concurrency: int = 1) -> None:
        self.name = name
        self.log_path = folder / f"celery-{name}.log"
        self.log = self.log_path.open("ab")
        cmd = [
            sys.executable, "-m", "celery", "-A", f"{module}:celery_app", "worker",
            "--hostname", f"{name}@%h", "--pool", "prefork", "--concurrency", str(concurrency),
            "--without-gossip", "--without-mingle", "--loglevel", "INFO",
        ]
        self.process = subprocess.Popen(cmd, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        env={**env, "WORKER_NAME": name}, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"celery worker {self.name} exited:\n{self.output()}")
            if " ready." in self.output():
                return
            time.sleep(0.2)
        self.kill()
        raise RuntimeError(f"celery worker {self.name} did not become ready:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the worker and its pool process, as the kernel's OOM killer or a lost host would."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        self.log.close()

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        self.log.close()


class Stack:
    """redis-server + gunicorn + the workers ``a`` and ``b``."""

    def __init__(self, module: str = "tests.celery_app", *, concurrency: int = 1, env: dict[str, str] | None = None,
                 extra_args: list[str] | None = None) -> None:
        self.module, self.concurrency = module, concurrency
        self.n = 0  # JSON-RPC ids
        self.folder = Path(tempfile.mkdtemp(prefix="flask-mcp-celery-"))
        port = free_port()
        self.redis = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        url = f"redis://127.0.0.1:{port}/0"
        self._wait_redis(port)
        self.env = {**os.environ, "CELERY_BROKER_URL": url, "FLASK_MCP_BACKEND": url,
                    "FLASK_MCP_TASK_POLL_INTERVAL_MS": "100", "VISIBILITY_TIMEOUT": str(VISIBILITY_TIMEOUT),
                    **(env or {})}
        self.workers: dict[str, Worker] = {}
        self.server: GunicornServer | None = None
        try:
            self.server = GunicornServer(f"{module}:app", workers=2, threads=16, env=self.env, extra_args=extra_args)
            for name in ("a", "b"):
                self.workers[name] = self._worker(name)
        except BaseException:
            self.stop()
            raise

    def _worker(self, name: str) -> Worker:
        return Worker(name, self.env, self.folder, self.module, self.concurrency)

    def _wait_redis(self, port: int) -> None:
        import redis

        client = redis.Redis(port=port, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                return
            except redis.exceptions.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
            finally:
                client.close()

    def restart(self, name: str) -> None:
        self.workers[name].kill()
        self.workers[name] = self._worker(name)

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        if self.server is not None:
            self.server.stop()
        self.redis.terminate()
        self.redis.wait(timeout=10)
        shutil.rmtree(self.folder, ignore_errors=True)

    def call(self, method: str, params: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """One 2026-07-28 request declaring the tasks extension (and ``meta``); its result (schema-checked)."""
        self.n += 1
        name = params.get("name") if method == "tools/call" else params.get("taskId")
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
                   "MCP-Protocol-Version": MODERN, "Mcp-Method": method, "Mcp-Name": str(name)}
        body = {"jsonrpc": "2.0", "id": self.n, "method": method,
                "params": {**params, "_meta": {**META, **(meta or {})}}}
        assert self.server is not None
        response = requests.post(self.server.url, json=body, headers=headers, timeout=30)
        assert response.status_code == 200, response.text[:500]
        message: dict[str, Any] = json.loads(response.text)
        validate_message(MODERN, method, message)
        assert "result" in message, message
        result: dict[str, Any] = message["result"]
        return result

    def start(self, tool: str, meta: dict[str, Any] | None = None, **arguments: Any) -> str:
        created = self.call("tools/call", {"name": tool, "arguments": arguments}, meta)
        assert created["resultType"] == "task", created
        assert created["status"] == "working"
        task_id: str = created["taskId"]
        return task_id

    def get(self, task_id: str) -> dict[str, Any]:
        return self.call("tasks/get", {"taskId": task_id})

    def wait_for(self, task_id: str, test: Any, what: str) -> dict[str, Any]:
        until = time.monotonic() + DEADLINE
        while True:
            task = self.get(task_id)
            if test(task):
                return task
            assert task["status"] not in {"completed", "failed", "cancelled"} or test(task), task
            assert time.monotonic() < until, f"task {task_id} never got {what}: {task}"
            time.sleep(0.1)

    def running_on(self, task_id: str) -> str:
        """The worker running the task, once its tool runs."""
        task = self.wait_for(task_id, lambda t: (t.get("statusMessage") or "").startswith("running on "), "running")
        return str(task["statusMessage"]).removeprefix("running on ")

    def status(self, task_id: str, status: str) -> dict[str, Any]:
        return self.wait_for(task_id, lambda t: t["status"] == status, status)


def needs_celery_and_redis() -> None:
    if importlib.util.find_spec("celery") is None:
        unavailable("celery is not installed (pip install 'flask-mcp[celery]')")
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed")


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    needs_celery_and_redis()
    built = Stack()
    try:
        yield built
    finally:
        built.stop()


def test_a_task_runs_on_a_celery_worker_and_completes(stack: Stack) -> None:
    task_id = stack.start("tasked", seconds=0.2)
    task = stack.status(task_id, "completed")
    result = task["result"]
    assert result["resultType"] == "complete"
    assert result["structuredContent"]["worker"] in {"a", "b"}  # not a web worker ("web")
    assert result["structuredContent"]["task"] == task_id


def test_a_task_asks_a_question_and_the_answer_reaches_its_celery_worker(stack: Stack) -> None:
    task_id = stack.start("tasked_question", seconds=0)
    task = stack.status(task_id, "input_required")
    (key, question), = task["inputRequests"].items()
    assert question["method"] == "elicitation/create"
    answer = {"action": "accept", "content": {"name": "Ada"}}
    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    task = stack.status(task_id, "completed")
    assert task["result"]["structuredContent"]["greeting"] == "Hello, Ada!"


def test_a_running_task_is_cancelled_on_its_worker(stack: Stack) -> None:
    task_id = stack.start("tasked", seconds=60)
    stack.running_on(task_id)
    stack.call("tasks/cancel", {"taskId": task_id})
    started = time.monotonic()
    task = stack.status(task_id, "cancelled")
    assert task["statusMessage"] == "Cancelled."  # the tool stopped at its check, on the worker
    print(f"cancelled on the worker after {time.monotonic() - started:.2f} s")


def test_a_queued_task_cancelled_never_starts(stack: Stack) -> None:
    busy = [stack.start("tasked", seconds=60) for _ in range(2)]
    assert {stack.running_on(task_id) for task_id in busy} == {"a", "b"}
    queued = stack.start("tasked", seconds=0.1)
    assert stack.get(queued)["status"] == "working"
    stack.call("tasks/cancel", {"taskId": queued})
    task = stack.get(queued)  # no worker had it: cancelled at once
    assert task["status"] == "cancelled" and task["statusMessage"] == "Cancelled before it started."
    for task_id in busy:
        stack.call("tasks/cancel", {"taskId": task_id})
    for task_id in busy:
        stack.status(task_id, "cancelled")
    time.sleep(1.5)  # a worker is free now and takes the queued message: it must not run the tool
    task = stack.get(queued)
    assert task["status"] == "cancelled" and task["statusMessage"] == "Cancelled before it started."


def test_a_task_whose_worker_is_killed_completes_on_the_other(stack: Stack) -> None:
    task_id = stack.start("tasked", seconds=2)
    first = stack.running_on(task_id)
    stack.workers[first].kill()
    try:
        task = stack.status(task_id, "completed")
        other = "b" if first == "a" else "a"
        assert task["result"]["structuredContent"]["worker"] == other
        assert task["result"]["structuredContent"]["task"] == task_id
    finally:
        stack.restart(first)


def test_a_question_answered_before_the_worker_died_is_not_asked_again(stack: Stack) -> None:
    task_id = stack.start("tasked_question", seconds=3)
    task = stack.status(task_id, "input_required")
    (key, _), = task["inputRequests"].items()
    answer = {"action": "accept", "content": {"name": "Grace"}}
    stack.call("tasks/update", {"taskId": task_id, "inputResponses": {key: answer}})
    task = stack.wait_for(task_id, lambda t: (t.get("statusMessage") or "").startswith("greeting on "), "greeting")
    first = str(task["statusMessage"]).removeprefix("greeting on ")
    stack.workers[first].kill()
    try:
        task = stack.wait_for(task_id, lambda t: t["status"] in {"completed", "input_required"}, "an end")
        assert task["status"] == "completed", task  # the re-run got the answer given to the first run
        other = "b" if first == "a" else "a"
        assert task["result"]["structuredContent"] == {"greeting": "Hello, Grace!", "worker": other}
    finally:
        stack.restart(first)


def test_a_tool_not_safe_to_repeat_is_failed_when_its_worker_dies(stack: Stack) -> None:
    task_id = stack.start("fragile", seconds=2)
    first = stack.running_on(task_id)
    stack.workers[first].kill()
    try:
        task = stack.status(task_id, "failed")
        assert "not run twice" in task["statusMessage"]
        assert task["error"]["code"] == -32603
    finally:
        stack.restart(first)


def test_tasks_complete_while_gunicorn_is_restarted(stack: Stack) -> None:
    tasks = [stack.start("tasked", seconds=2) for _ in range(2)]
    for task_id in tasks:
        stack.running_on(task_id)
    assert stack.server is not None
    stack.server.stop()  # the master and its workers exit; the tasks run on in Celery
    stack.server = GunicornServer("tests.celery_app:app", workers=2, threads=16, env=stack.env)
    for task_id in tasks:
        task = stack.status(task_id, "completed")
        assert task["result"]["structuredContent"]["task"] == task_id


def _exported(base: Path, kind: str, until: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    """The JSON lines every process wrote to ``{base}.{kind}{pid}``, once ``until`` holds of them (or 20 s passed)."""
    deadline = time.monotonic() + 20
    while True:
        found = []
        for path in glob.glob(f"{base}.{kind}[0-9]*"):
            found += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        if until(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def _points(exports: list[dict[str, Any]], name: str) -> list[tuple[str, dict[str, Any], Any]]:
    """Every exported value of metric ``name``: (service.name, attributes, value), in export order."""
    found = []
    for export in exports:
        for resource in export["resource_metrics"]:
            service = resource["resource"]["attributes"]["service.name"]
            for scope in resource["scope_metrics"]:
                for metric in scope["metrics"]:
                    if metric["name"] == name:
                        found += [(service, point["attributes"], point["value"])
                                  for point in metric["data"]["data_points"]]
    return found


def test_a_celery_task_s_span_continues_its_call_s_trace_and_its_worker_counts_it(tmp_path: Path) -> None:
    """The SDK in the gunicorn workers and in the Celery pool processes
    (tests/celery_app.py with TELEMETRY_SPANS), spans and metrics read back from
    the files each process wrote."""
    needs_celery_and_redis()
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        unavailable("the OpenTelemetry SDK is not installed (pip install opentelemetry-sdk)")
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    base = tmp_path / "telemetry"
    stack = Stack(env={"TELEMETRY_SPANS": str(base)})
    try:
        task_id = stack.start("tasked", meta={"traceparent": f"00-{trace_id}-{parent_id}-01"}, seconds=1)
        worker = stack.running_on(task_id)
        stack.status(task_id, "completed")

        def ran(spans: list[dict[str, Any]]) -> bool:
            return any(span["name"] == "task tasked" for span in spans)

        spans = _exported(base, "", ran)
        (call,) = [span for span in spans if span["name"] == "tools/call tasked"]
        (run,) = [span for span in spans if span["name"] == "task tasked"]
        assert call["resource"]["attributes"]["service.name"] == "celery-app-web"
        assert run["resource"]["attributes"]["service.name"] == f"celery-app-{worker}"  # on the Celery worker
        assert call["context"]["trace_id"] == run["context"]["trace_id"] == f"0x{trace_id}"
        assert call["parent_id"] == f"0x{parent_id}"
        assert run["parent_id"] == call["context"]["span_id"]
        assert run["kind"] == "SpanKind.INTERNAL"
        assert run["attributes"] == {"gen_ai.tool.name": "tasked", "flask_mcp.task.id": task_id,
                                     "flask_mcp.task.status": "completed", "mcp.method.name": "tools/call",
                                     "mcp.protocol.version": MODERN, "gen_ai.operation.name": "execute_tool",
                                     "jsonrpc.request.id": call["attributes"]["jsonrpc.request.id"]}
        assert run["status"]["status_code"] == "UNSET"

        def running_on_worker(exports: list[dict[str, Any]]) -> list[Any]:
            return [value for service, _, value in _points(exports, "flask_mcp.tasks.running")
                    if service == f"celery-app-{worker}"]

        def counted(exports: list[dict[str, Any]]) -> bool:
            # The task is counted as ended inside its run, and stops counting as running just
            # after: an export between the two shows both, so wait for the one after it too.
            ended = any(service == f"celery-app-{worker}" and value == 1
                        for service, _, value in _points(exports, "flask_mcp.tasks.ended"))
            running = running_on_worker(exports)
            return ended and bool(running) and running[-1] == 0

        exports = _exported(base, "metrics.", counted)
        ended = [(attributes, value) for service, attributes, value in _points(exports, "flask_mcp.tasks.ended")
                 if service == f"celery-app-{worker}"]
        assert ended and ended[-1] == ({"flask_mcp.task.status": "completed"}, 1)
        running = running_on_worker(exports)
        assert 1 in running and running[-1] == 0  # counted while the tool ran (1 s; an export every 100 ms)
    finally:
        stack.stop()


@pytest.mark.conformance
def test_the_conformance_suites_task_scenarios_pass_on_celery(tmp_path: Path) -> None:
    """The official suite's extensions leg (the tasks-* scenarios) against the
    conformance fixture app with its task tools on two Celery workers."""
    needs_celery_and_redis()
    from test_conformance import run

    stack = Stack("tests.conformance.app", concurrency=4, env={"FLASK_MCP_TASK_RUNNER": "celery"},
                  extra_args=["--keep-alive", "5"])
    try:
        assert stack.server is not None
        proc = run(stack.server.url, "--legs", "extensions", "--report", str(tmp_path / "report"), timeout=900)
        logs = "".join(worker.output() for worker in stack.workers.values())
    finally:
        stack.stop()
    print(proc.stdout)
    assert proc.returncode == 0, f"{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    assert "leg extensions done" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].endswith(" 0 failed")
    assert "flask_mcp.run_task" in logs and "succeeded" in logs  # the tasks ran on the workers
