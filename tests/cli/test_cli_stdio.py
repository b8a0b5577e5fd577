"""``flask mcp stdio`` run with click's runner: the lines written to it go
through the app's endpoint and every answer comes back as one line, in both
eras. (Real processes, the file-descriptor redirect and the official client:
tests/e2e/test_e2e_stdio.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from conftest import validate_message
from flask import Flask, request
from stdio_app import create_app

from flask_mcp import MCP, Context

MODERN = "2026-07-28"


def meta(**extra: Any) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "io.modelcontextprotocol/clientInfo": {"name": "stdio-test", "version": "1"},
        **extra,
    }


def line(message: dict[str, Any]) -> str:
    return json.dumps(message) + "\n"


def serve(app: Flask, *lines: str, args: tuple[str, ...] = ()) -> tuple[Any, list[Any]]:
    """Run ``flask mcp stdio`` on ``lines``; the result and each line it wrote, parsed."""
    result = app.test_cli_runner().invoke(args=["mcp", "stdio", *args], input="".join(lines))
    written = [json.loads(text) for text in result.stdout.splitlines()]
    return result, written


def by_id(messages: list[Any]) -> dict[Any, dict[str, Any]]:
    return {m["id"]: m for m in messages if isinstance(m, dict) and "id" in m}


def test_each_request_is_answered_on_a_line_of_its_own_through_the_endpoint() -> None:
    result, written = serve(
        create_app(),
        line({"jsonrpc": "2.0", "id": 0, "method": "server/discover", "params": {"_meta": meta()}}),
        line({"jsonrpc": "2.0", "id": "sum", "method": "tools/call",
              "params": {"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta()}}),
        "\n",  # blank lines are no messages
        line({"jsonrpc": "2.0", "id": 7, "method": "nope/nothing", "params": {"_meta": meta()}}),
    )
    assert result.exit_code == 0, result.output
    answers = by_id(written)
    assert set(answers) == {0, "sum", 7}  # ids come back as sent: 0 stays a number, "sum" a string
    assert MODERN in answers[0]["result"]["supportedVersions"]
    assert answers["sum"]["result"]["structuredContent"] == {"result": 5}
    assert answers[7]["error"]["code"] == -32601
    for message in written:
        validate_message(MODERN, None, message)
    assert "flask-mcp: serving stdio-test over stdio" in result.stderr


def test_progress_and_log_messages_precede_the_result_and_a_question_comes_back_as_input_required() -> None:
    _, written = serve(create_app(), line({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "plan_trip", "arguments": {},
                   "_meta": meta(progressToken="trip", **{"io.modelcontextprotocol/logLevel": "info"})},
    }))
    assert [m.get("method") for m in written] == [
        "notifications/progress", "notifications/message", "notifications/progress", None]
    assert written[0]["params"] == {"progressToken": "trip", "progress": 1, "total": 3,
                                    "message": "looking at the calendar"}
    assert written[1]["params"]["data"] == "the calendar is free"
    result = written[3]["result"]
    assert result["resultType"] == "input_required"
    [question] = result["inputRequests"].values()
    assert question["params"]["message"] == "Where to?"


def test_a_line_that_is_not_json_gets_the_endpoints_parse_error() -> None:
    result, written = serve(create_app(), "{not json\n",
                            line({"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta()}}))
    assert result.exit_code == 0
    errors = [m for m in written if "error" in m]
    assert [e["error"]["code"] for e in errors] == [-32700]
    assert 2 in by_id(written)


def test_a_tool_with_a_header_argument_is_called_without_listing_it_first() -> None:
    """A 2026-07-28 call must mirror ``x-mcp-header`` arguments in ``Mcp-Param-*``
    headers: the relay looks the tool's schema up itself."""
    app = create_app()
    seen: list[str | None] = []

    @app.before_request
    def record() -> None:
        seen.append(request.headers.get("Mcp-Param-Region"))

    _, written = serve(app, line({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "shelve", "arguments": {"region": "Zürich", "book": "Emma"}, "_meta": meta()},
    }))
    assert by_id(written)[1]["result"]["content"][0]["text"] == "Emma shelved in Zürich"
    assert "=?base64?WsO8cmljaA==?=" in seen  # non-ASCII travels Base64-encoded, as a client sends it


def test_cancelling_a_2026_request_stops_it_and_leaves_it_unanswered(tmp_path: Path) -> None:
    """As on HTTP, a 2026-07-28 request that may stream (it asked for
    progress here) is cancelled by closing its connection; one answered as
    plain JSON runs to its end."""
    marker = tmp_path / "cancelled.txt"
    _, written = serve(
        create_app(),
        line({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
              "params": {"name": "wait_for_cancel", "arguments": {"marker": str(marker)},
                         "_meta": meta(progressToken="wait")}}),
        line({"jsonrpc": "2.0", "method": "notifications/cancelled",
              "params": {"requestId": 5, "reason": "changed my mind"}}),
        line({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
              "params": {"name": "add", "arguments": {"a": 1, "b": 1}, "_meta": meta()}}),
    )
    assert set(by_id(written)) == {6}
    for _ in range(100):  # the tool's thread notices within its 50 ms poll
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.read_text() == "cancelled"


def test_a_legacy_client_gets_a_session_that_ends_with_the_connection() -> None:
    app = create_app()
    requests: list[tuple[str, str | None, str | None]] = []

    @app.before_request
    def record() -> None:
        requests.append((request.method, request.headers.get("Mcp-Session-Id"),
                         request.headers.get("MCP-Protocol-Version")))

    result, written = serve(
        app,
        line({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "legacy", "version": "1"}}}),
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        line({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "add", "arguments": {"a": 4, "b": 5}}}),
        line({"jsonrpc": "2.0", "id": 3, "method": "ping"}),
    )
    assert result.exit_code == 0, result.output
    answers = by_id(written)
    assert answers[1]["result"]["protocolVersion"] == "2025-11-25"
    assert answers[2]["result"]["structuredContent"] == {"result": 9}
    assert answers[3]["result"] == {}
    assert len(written) == 3  # the notification has no answer
    session = requests[1][1]
    assert session is not None
    assert requests[0] == ("POST", None, None)
    assert requests[1:] == [("POST", session, "2025-11-25")] * 3 + [("DELETE", session, "2025-11-25")]


def test_an_app_with_auth_needs_a_caller_and_serves_as_the_one_given() -> None:
    app = create_app(MCP_AUTH=True, MCP_RESOURCE_URL="https://stdio.example.com/mcp")
    app.extensions["mcp"].extension.token_verifier(lambda token: None)
    refused, written = serve(app, line({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                                        "params": {"_meta": meta()}}))
    assert refused.exit_code == 2
    assert "MCP_AUTH is on, so every request needs a caller: give --as SUBJECT" in refused.stderr
    assert written == []

    served, written = serve(
        app,
        line({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
              "params": {"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": meta()}}),
        args=("--as", "ann@example.com"),
    )
    assert served.exit_code == 0, served.output
    assert by_id(written)[1]["result"]["structuredContent"] == {"result": 3}


def test_a_legacy_stream_the_server_lets_go_is_resumed_to_its_end() -> None:
    """With ``MCP_SSE_POLL_AFTER`` a 2025-11-25 call's stream lets its
    connection go; the relay resumes it (GET + Last-Event-ID) as an HTTP
    client would, and the stdio client sees one unbroken answer."""
    app = create_app(MCP_SSE_POLL_AFTER=0.2)
    resumed: list[str | None] = []

    @app.before_request
    def record() -> None:
        if request.method == "GET":
            resumed.append(request.headers.get("Last-Event-ID"))

    mcp: MCP = app.extensions["mcp"].extension

    @mcp.tool
    def slow_count(n: int, ctx: Context) -> int:
        """Counts to n, a report every 0.1 s."""
        for i in range(1, n + 1):
            time.sleep(0.1)
            ctx.report_progress(i, n)
        return n

    _, written = serve(
        app,
        line({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                         "clientInfo": {"name": "legacy", "version": "1"}}}),
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        line({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "slow_count", "arguments": {"n": 8}, "_meta": {"progressToken": "p"}}}),
    )
    assert resumed and all(resumed)
    assert [m["params"]["progress"] for m in written if m.get("method") == "notifications/progress"] == list(
        range(1, 9))
    assert by_id(written)[2]["result"]["structuredContent"] == {"result": 8}
