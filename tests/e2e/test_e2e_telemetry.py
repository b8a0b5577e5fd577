"""Spans and the access log under real gunicorn: two workers, the SDK
configured in each (tests/telemetry_app.py), spans read back from the files
the workers wrote."""

from __future__ import annotations

import glob
import json
import time
from pathlib import Path
from typing import Any

import pytest
import requests

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
def server(gunicorn_server: Any, tmp_path: Path) -> Any:
    spans = tmp_path / "spans"
    started = gunicorn_server("tests.telemetry_app:app", workers=2, env={"TELEMETRY_SPANS": str(spans)})
    started.spans = spans
    return started


def _call(url: str, name: str, arguments: dict[str, Any] | None = None, *, meta: dict[str, Any] | None = None,
          headers: dict[str, str] | None = None, request_id: int = 1) -> requests.Response:
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments or {}, "_meta": {**META, **(meta or {})}}}
    head = {**ACCEPT, **TOKEN, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name,
            **(headers or {})}
    return requests.post(url, json=body, headers=head, timeout=TIMEOUT)


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


def test_elicitation_carries_the_trace_and_the_answer_may_reach_the_other_worker(server: Any) -> None:
    traceparent = f"00-{TRACE_ID}-{PARENT_ID}-01"
    with requests.Session() as http, requests.Session() as answers:
        http.headers.update({**ACCEPT, **TOKEN})
        init = http.post(server.url, timeout=TIMEOUT, json={
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
                       "clientInfo": {"name": "e2e-telemetry", "version": "1"}}})
        session = {"Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
        http.headers.update(session)
        answers.headers.update({**ACCEPT, **TOKEN, **session})
        http.post(server.url, timeout=TIMEOUT, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        asked: list[dict[str, Any]] = []
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
                    reply = answers.post(server.url, timeout=TIMEOUT, json={
                        "jsonrpc": "2.0", "id": message["id"],
                        "result": {"action": "accept", "content": {"name": "Ada"}}})
                    assert reply.status_code == 202, reply.text
                elif message.get("id") == 1:
                    result = message["result"]
                    break
    assert result is not None and "Ada" in result["content"][0]["text"]
    assert asked[0]["params"]["_meta"]["traceparent"].split("-")[1] == TRACE_ID
    call = _named(_spans(server, 3), "tools/call ask_name")
    assert call["context"]["trace_id"] == f"0x{TRACE_ID}"
    assert call["status"]["status_code"] == "UNSET"
