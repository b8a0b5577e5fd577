"""A deploy that neither waits for nor cuts a durable call (issue #33, item 3),
with real processes on loopback, all started here and stopped by their PID:
redis-server, gunicorn (gthread, two workers, the shipped
``flask_mcp.gunicorn_conf``, ``graceful_timeout`` 30 s) and one Celery worker.

A 2025-11-25 session's durable call streams progress from Celery. HUP to the
master makes gunicorn SIGTERM its old workers: the one holding the stream
closes it at once with ``retry:`` and exits in well under ``graceful_timeout``;
the client resumes (``GET`` + ``Last-Event-ID``) on a new worker and gets the
rest: every progress report once, in order, then the result. SIGKILL of every
web worker during a durable call that asks a question: the client resumes,
answers the question (a POST to whichever worker), and gets the result.

Runtime: about 25 s; the newest-Flask tox env only (tox.ini).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
from conftest import worker_pids
from test_e2e_celery import Stack, needs_celery_and_redis

pytestmark = pytest.mark.e2e

LEGACY = "2025-11-25"
GRACEFUL_TIMEOUT = 30


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    needs_celery_and_redis()
    built = Stack(extra_args=["-c", "python:flask_mcp.gunicorn_conf", "--graceful-timeout", str(GRACEFUL_TIMEOUT),
                              "--workers", "2"])
    built.workers.pop("b").stop()  # one Celery worker is enough here
    try:
        yield built
    finally:
        built.stop()


class Session:
    """A 2025-11-25 session spoken with plain HTTP, reading streams as they come."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.n = 0
        self.headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        answer = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": LEGACY, "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "drain-e2e", "version": "1"}}})
        self.headers["Mcp-Session-Id"] = answer.headers["Mcp-Session-Id"]
        self.headers["MCP-Protocol-Version"] = LEGACY
        assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202

    def post(self, body: dict[str, Any], stream: bool = False) -> requests.Response:
        response = requests.post(self.url, json=body, headers=self.headers, stream=stream, timeout=60)
        assert response.status_code < 500, response.text[:300]
        return response

    def resume(self, last_event_id: str) -> requests.Response:
        headers = {**self.headers, "Accept": "text/event-stream", "Last-Event-ID": last_event_id}
        response = requests.get(self.url, headers=headers, stream=True, timeout=60)
        assert response.status_code == 200, response.text[:300]
        return response


def sse(response: requests.Response) -> Iterator[dict[str, str]]:
    """The stream's events (``id``, ``data``, ``retry`` fields) as they come; ends with the stream."""
    event: dict[str, str] = {}
    try:
        for raw in response.iter_lines(decode_unicode=True):
            line = raw or ""
            if not line:
                if event:
                    yield event
                event = {}
            elif not line.startswith(":"):
                name, _, value = line.partition(":")
                event[name] = value.removeprefix(" ")
    except requests.exceptions.ChunkedEncodingError:
        return  # the worker died under the stream
    if event:
        yield event


class Call:
    """One durable call read the way an MCP client reads it: resumed while it
    has an event id and no answer, questions answered as they come."""

    def __init__(self, session: Session, request_id: int, arguments: dict[str, Any]) -> None:
        self.session = session
        self.request_id = request_id
        self.progress: list[float] = []
        self.ids: list[str] = []
        self.retries = 0
        self.asked = 0
        self.result: dict[str, Any] | None = None
        self.last_id: str | None = None
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "durable_steps", "arguments": arguments, "_meta": {"progressToken": "p"}}}
        self.response = session.post(body, stream=True)
        assert self.response.headers["Content-Type"].startswith("text/event-stream")
        self.events = sse(self.response)  # one reader per connection: a second one would lose what the first buffered

    def read(self, until_progress: int | None = None) -> None:
        """Read the current connection until ``until_progress`` reports, or its end."""
        for event in self.events:
            if "retry" in event:
                self.retries += 1
            if "id" in event:
                self.last_id = event["id"]
            if not event.get("data"):
                continue  # the priming event, or a resumed stream's opening one (the id it resumes from)
            self.ids.append(event["id"])
            message = json.loads(event["data"])
            if message.get("method") == "notifications/progress":
                self.progress.append(message["params"]["progress"])
            elif message.get("method") == "elicitation/create":
                self.asked += 1
                self.session.post({"jsonrpc": "2.0", "id": message["id"],
                                   "result": {"action": "accept", "content": {"name": "Ada"}}})
            elif message.get("id") == self.request_id:
                self.result = message
                return
            if until_progress is not None and len(self.progress) >= until_progress:
                return

    def finish(self, within: float = 60.0) -> None:
        deadline = time.monotonic() + within
        while self.result is None:
            assert time.monotonic() < deadline, f"no answer: {self.progress}"
            assert self.last_id is not None
            self.response.close()
            time.sleep(0.2)
            try:
                self.response = self.session.resume(self.last_id)
            except (requests.ConnectionError, AssertionError):
                continue  # the workers are still starting
            self.events = sse(self.response)
            self.read()


def test_hup_lets_a_durable_stream_go_with_retry_and_the_client_resumes_on_a_new_worker(stack: Stack) -> None:
    assert stack.server is not None
    session = Session(stack.server.url)
    call = Call(session, 1, {"steps": 40, "interval": 0.25})  # 10 s: a worker waiting for it would take ~9 s
    call.read(until_progress=3)
    old = worker_pids(stack.server)
    hup = time.monotonic()
    os.kill(stack.server.process.pid, signal.SIGHUP)  # new workers; the old ones get SIGTERM
    call.read()  # the old worker lets the stream go
    let_go = time.monotonic() - hup
    assert call.result is None and call.retries >= 2  # the priming event's retry, and the one letting go
    assert let_go < 2.0
    while old & worker_pids(stack.server):
        assert time.monotonic() - hup < 5.0, "the old worker waited for its stream"
        time.sleep(0.1)
    exited = time.monotonic() - hup
    call.finish()
    assert call.result is not None and call.result["result"]["structuredContent"]["steps"] == 40
    assert call.progress == list(range(1, 41))
    assert len(call.ids) == len(set(call.ids))
    print(f"\nHUP: stream let go after {let_go:.2f} s, old workers gone after {exited:.2f} s "
          f"(graceful_timeout {GRACEFUL_TIMEOUT} s)")


def test_a_durable_call_with_a_question_survives_every_web_worker_being_killed(stack: Stack) -> None:
    assert stack.server is not None
    session = Session(stack.server.url)
    call = Call(session, 2, {"steps": 12, "interval": 0.25, "ask": True})
    call.read(until_progress=2)
    for pid in worker_pids(stack.server):
        os.kill(pid, signal.SIGKILL)  # the master starts new ones
    call.read()
    call.finish()
    assert call.asked == 1
    assert call.result is not None
    assert call.result["result"]["structuredContent"]["name"] == "Ada"
    assert call.progress == list(range(1, 13))
