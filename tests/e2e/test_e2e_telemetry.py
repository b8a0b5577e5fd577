"""Spans and the access log under real gunicorn: two workers, the SDK
configured in each (tests/telemetry_app.py), spans read back from the files
the workers wrote."""

from __future__ import annotations

import functools
import glob
import http.client
import json
import operator
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from test_e2e_streaming import connection_to_worker

pytest.importorskip("opentelemetry.sdk", reason="the OpenTelemetry SDK (pip install opentelemetry-sdk)")

pytestmark = pytest.mark.e2e

TIMEOUT = 20
TOKEN = {"Authorization": "Bearer any-token-will-do"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "e2e-telemetry", "version": "1.0.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


@pytest.fixture
def server(gunicorn_server: Any, tmp_path: Path) -> Iterator[Any]:
    spans = tmp_path / "spans"
    started = gunicorn_server("tests.telemetry_app:app", workers=2, env={"TELEMETRY_SPANS": str(spans)})
    started.spans = spans
    started.workers = []  # the pinned connections (_worker), closed after the test
    yield started
    for worker in started.workers:
        worker.connection.close()


def _call(url: str, name: str, arguments: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
          headers: dict[str, str] | None = None, request_id: int = 1) -> requests.Response:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments or {}, "_meta": {**META, **(meta or {})}}}
    head = {**ACCEPT, **TOKEN, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name,
            **(headers or {})}
    return requests.post(url, json=body, headers=head, timeout=TIMEOUT)


class Worker:
    """One keep-alive connection, hence one gunicorn worker: ``pid``, learned with ``whoami``."""

    def __init__(self, connection: http.client.HTTPConnection) -> None:
        self.connection = connection
        self.pid = int(self.call("whoami", request_id="whoami")["result"]["structuredContent"]["pid"])

    def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, dict[str, Any] | None]:
        """POST one message on this connection: the status and the JSON answer (``None``: no body)."""
        socket = self.connection.sock
        self.connection.request("POST", "/mcp", body=json.dumps(body).encode(), headers=headers)
        response = self.connection.getresponse()
        raw = response.read()
        assert self.connection.sock is socket, "the server closed the connection: the worker may change"
        return response.status, json.loads(raw) if raw else None

    def call(self, name: str, params: dict[str, Any] | None = None, *, request_id: str,
             meta: dict[str, Any] | None = None, method: str = "tools/call") -> dict[str, Any]:
        """One 2026-07-28 request (``tools/call`` of ``name`` unless ``method`` says otherwise)."""
        params = {**({"name": name, "arguments": {}} if method == "tools/call" else {}), **(params or {})}
        params["_meta"] = {**META, **(meta or {})}
        headers = {**ACCEPT, **TOKEN, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method, "Mcp-Name": name}
        status, answer = self.post({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, headers)
        assert status == 200 and answer is not None, (status, answer)
        return answer


def _worker(server: Any, wanted: Callable[[int], bool] = lambda pid: True) -> Worker:
    """A new connection served by a worker ``wanted`` accepts (kept open until the server stops)."""
    chosen = connection_to_worker(server.port, Worker, wanted, "the wanted worker", timeout=TIMEOUT)
    server.workers.append(chosen)
    return chosen


def _pid(span: dict[str, Any]) -> int:
    """The worker that recorded ``span`` (the app puts ``process.pid`` in its resource)."""
    return int(span["resource"]["attributes"]["process.pid"])


def _spans(server: Any, want: int) -> list[dict[str, Any]]:
    """The finished spans every worker wrote, once at least ``want`` are there."""
    deadline = time.monotonic() + 10
    while True:
        found = []
        for path in glob.glob(f"{server.spans}.[0-9]*"):
            found += [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
        if len(found) >= want or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def _access(server: Any) -> list[list[str]]:
    lines: list[list[str]] = []
    for path in glob.glob(f"{server.spans}.access.*"):
        lines += [line.split("|") for line in Path(path).read_text().splitlines() if line.strip()]
    return lines


def _named(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    found = [span for span in spans if span["name"] == name]
    assert len(found) == 1, [span["name"] for span in spans]
    return found[0]


def test_tool_call_span_tree_and_a_client_traceparent(server: Any) -> None:
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    answer = _call(server.url, "get_weather", {"city": "Oslo"}, meta={"traceparent": traceparent})
    assert answer.status_code == 200, answer.text
    spans = _spans(server, 2)
    call = _named(spans, "tools/call get_weather")
    lookup = _named(spans, "lookup")
    assert call["kind"] == "SpanKind.SERVER"
    assert call["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert call["parent_id"] == f"0x{PARENT_ID}"
    assert lookup["parent_id"] == call["context"]["span_id"]
    assert lookup["context"]["trace_id"] == f"0x{TRACE_ID}"
    attributes = call["attributes"]
    assert attributes["mcp.method.name"] == "tools/call"
    assert attributes["gen_ai.tool.name"] == "get_weather"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["mcp.protocol.version"] == "2026-07-28"
    assert attributes["jsonrpc.request.id"] == "1"
    assert call["status"]["status_code"] == "UNSET"
    records = _access(server)
    assert ["tools/call", "get_weather", "ok", TRACE_ID] == records[0][:4]


def test_tool_error_and_refused_call(server: Any) -> None:
    assert _call(server.url, "broken").json()["result"]["isError"] is True
    refused = _call(server.url, "get_weather", {"city": "Rome"}, headers={"Authorization": ""}, request_id=2)
    assert refused.status_code == 401
    spans = _spans(server, 2)
    broken = _named(spans, "tools/call broken")
    assert broken["attributes"]["error.type"] == "tool_error"
    assert broken["status"]["status_code"] == "ERROR"
    denied = _named(spans, "tools/call get_weather")
    assert denied["attributes"]["error.type"] == "401"
    assert denied["status"]["status_code"] == "ERROR"
    outcomes = sorted(record[2] for record in _access(server))
    assert outcomes == ["refused 401", "tool_error"]
    assert "any-token-will-do" not in "".join("|".join(r) for r in _access(server))


def test_streamed_legacy_call_with_progress(server: Any) -> None:
    with requests.Session() as http:
        http.headers.update({**ACCEPT, **TOKEN})
        init = http.post(server.url, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "e2e-telemetry", "version": "1"}}})
        session_id = init.headers["Mcp-Session-Id"]
        http.headers.update({"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"})
        http.post(server.url, timeout=TIMEOUT, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        answer = http.post(server.url, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": "p"}}})
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        assert answer.text.count("notifications/progress") == 3
    spans = _spans(server, 3)
    call = _named(spans, "tools/call slow")
    assert call["attributes"]["mcp.session.id"] == session_id
    assert call["attributes"]["mcp.protocol.version"] == "2025-11-25"
    assert "error.type" not in call["attributes"]
    assert _named(spans, "initialize")["status"]["status_code"] == "UNSET"
    assert _named(spans, "notifications/initialized")["attributes"]["mcp.session.id"] == session_id


def test_an_elicitation_answered_through_the_other_worker_joins_the_call_s_trace(server: Any) -> None:
    """The call streams from one worker (it names itself in the question); the
    answer is POSTed on a connection pinned to the other worker, as an
    instrumented client does: in the trace the question carried (here its
    ``traceparent`` header). Both workers' spans are in the client's trace."""
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    with requests.Session() as http:
        http.headers.update({**ACCEPT, **TOKEN})
        init = http.post(server.url, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                       "clientInfo": {"name": "e2e-telemetry", "version": "1"}}})
        session = {"Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        http.headers.update(session)
        http.post(server.url, timeout=TIMEOUT, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        asked: list[dict[str, Any]] = []
        answered_by: list[int] = []
        result = None
        with http.post(server.url, timeout=TIMEOUT, stream=True, json={
            "jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ask_name", "arguments": {}, "_meta": {"traceparent": traceparent}}}) as stream:
            for line in stream.iter_lines(decode_unicode=True):
                if not line.startswith("data:") or not line[5:].strip():
                    continue  # other fields, and the empty priming event of a resumable stream
                message = json.loads(line[5:])
                if message.get("method") == "elicitation/create":
                    asked.append(message)
                    waiting = int(message["params"]["message"].rsplit(" ", 1)[1].rstrip(")"))
                    other = _worker(server, functools.partial(operator.ne, waiting))
                    context = message["params"]["_meta"]["traceparent"]
                    accepted = {"action": "accept", "content": {"name": "Ada"}}
                    status, _ = other.post({"jsonrpc": "2.0", "id": message["id"], "result": accepted},
                                           {**ACCEPT, **TOKEN, **session, "traceparent": context})
                    assert status == 202
                    answered_by.append(other.pid)
                elif message.get("id") == 1:
                    result = message["result"]
                    break
    assert result is not None and "Ada" in result["content"][0]["text"]
    assert asked[0]["params"]["_meta"]["traceparent"].split("-")[1] == TRACE_ID
    spans = _spans(server, 5)
    call = _named(spans, "tools/call ask_name")
    answer = _named(spans, "response")
    assert call["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert call["status"]["status_code"] == "UNSET"
    assert _pid(answer) == answered_by[0] != _pid(call)  # two workers
    assert answer["context"]["trace_id"] == call["context"]["trace_id"]
    assert answer["parent_id"] == call["context"]["span_id"]
    assert answer["attributes"]["jsonrpc.request.id"] == asked[0]["id"]


def _round(worker: Worker, state: dict[str, Any] | None, request_id: str,
           meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """One round of ``two_questions`` on ``worker``: the answer to the last round's question, if any."""
    params: dict[str, Any] = {}
    if state is not None:
        (key,) = state["inputRequests"]
        params = {"requestState": state["requestState"],
                  "inputResponses": {key: {"action": "accept", "content": {"name": request_id}}}}
    caps: dict[str, Any] = {"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
    result: dict[str, Any] = worker.call("two_questions", params, request_id=request_id,
                                         meta={**caps, **(meta or {})})["result"]
    return result


def test_the_rounds_of_one_call_on_two_workers_read_as_one_call(server: Any) -> None:
    """Round 1 on one worker, in the client's trace; round 2 on the other with
    no trace context: it continues the first round's trace, as its child;
    round 3 back on the first with a trace context of its own: it keeps that
    parent and links the first round."""
    one = _worker(server)
    two = _worker(server, lambda pid: pid != one.pid)
    first = _round(one, None, "round-1", {"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
    second = _round(two, first, "round-2")
    other_trace, other_parent = "1" * 32, "2" * 16
    third = _round(one, second, "round-3", {"traceparent": f"00-{other_trace}-{other_parent}-01"})
    assert third["resultType"] == "complete" and third["content"][0]["text"] == "hello {'name': 'round-2'} " \
        "{'name': 'round-3'}"
    spans = [s for s in _spans(server, 5) if s["name"] == "tools/call two_questions"]
    by_id = {s["attributes"]["jsonrpc.request.id"]: s for s in spans}
    assert sorted(by_id) == ["round-1", "round-2", "round-3"]
    r1, r2, r3 = by_id["round-1"], by_id["round-2"], by_id["round-3"]
    assert _pid(r1) == _pid(r3) == one.pid and _pid(r2) == two.pid != one.pid
    assert r1["context"]["trace_id"] == r2["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert r2["parent_id"] == r1["context"]["span_id"] and r2["links"] == []
    assert r3["context"]["trace_id"] == f"0x{other_trace}" and r3["parent_id"] == f"0x{other_parent}"
    (link,) = r3["links"]
    assert link["context"]["span_id"] == r1["context"]["span_id"]
    assert link["attributes"] == {"flask_mcp.first_round": True}


def test_a_task_runs_under_its_call_and_tasks_get_on_the_other_worker_links_it(server: Any) -> None:
    tasks: dict[str, Any] = {
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
    one = _worker(server)
    two = _worker(server, lambda pid: pid != one.pid)
    created = one.call("background", request_id="start",
                       meta={**tasks, "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})["result"]
    task_id = created["taskId"]
    deadline = time.monotonic() + TIMEOUT
    polls = 0
    while True:
        polls += 1
        task = two.call(task_id, {"taskId": task_id}, request_id=f"get-{polls}", meta=tasks,
                        method="tasks/get")["result"]
        if task["status"] == "completed":
            break
        assert task["status"] == "working" and time.monotonic() < deadline, task
        time.sleep(0.05)
    assert task["result"]["content"][0]["text"] == "finished"
    spans = _spans(server, 3 + polls)
    call = _named(spans, "tools/call background")
    run = _named(spans, "task background")
    work = _named(spans, "background work")
    assert _pid(call) == _pid(run) == one.pid
    assert call["context"]["trace_id"] == run["context"]["trace_id"] == work["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert run["kind"] == "SpanKind.INTERNAL" and run["parent_id"] == call["context"]["span_id"]
    assert work["parent_id"] == run["context"]["span_id"]
    assert run["attributes"]["flask_mcp.task.id"] == task_id
    assert run["attributes"]["flask_mcp.task.status"] == "completed"
    gets = [s for s in spans if s["name"] == "tasks/get"]
    assert len(gets) == polls and {_pid(s) for s in gets} == {two.pid}
    for get in gets:
        assert get["attributes"]["flask_mcp.task.id"] == task_id
        assert [link["context"]["span_id"] for link in get["links"]] == [call["context"]["span_id"]]
