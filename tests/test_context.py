"""The per-call Context: progress and log notifications, and asking the client
for input (2026-07-28 multi round-trip results with a sealed requestState)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
def app(app: Flask) -> Flask:
    app.config["SECRET_KEY"] = "test-secret"
    mcp = MCP(app, name="ctx", version="1.0")

    @mcp.tool
    def steps(ctx: Context) -> str:
        """Reports three steps and logs at two levels."""
        for step in (1, 2, 3):
            ctx.report_progress(step, 3, f"step {step}")
        ctx.report_progress(2, 3)  # not increasing: dropped
        ctx.debug("fine detail")
        ctx.info("halfway")
        ctx.error("something odd")
        return "done"

    @mcp.tool
    def greet(ctx: Context, punctuation: str = "!") -> str:
        """Asks for a name, then greets."""
        answer = ctx.elicit("What is your name?", NAME, key="who")
        if not answer.accepted:
            return "No name given."
        return f"Hello, {answer.content['name']}{punctuation}" if answer.content else "?"

    @mcp.tool
    def two_rounds(ctx: Context) -> str:
        """Asks two questions in two rounds."""
        first = ctx.elicit("Name?", NAME, key="first")
        second = ctx.sample("Say something", max_tokens=20, key="second")
        return f"{first.content['name'] if first.content else ''}: {second['content']['text']}"

    @mcp.tool
    def everything(ctx: Context) -> str:
        """Asks three things in one round."""
        name, said, roots = ctx.ask(
            ctx.elicitation("Name?", NAME, key="n"), ctx.sampling("Hi", max_tokens=5, key="s"), ctx.roots(key="r")
        )
        return f"{name.action} {said['content']['text']} {len(roots)}"

    return app


def _progress(notes: list[dict[str, Any]]) -> list[float]:
    return [n["params"]["progress"] for n in notes if n["method"] == "notifications/progress"]


def _logs(notes: list[dict[str, Any]]) -> list[str]:
    return [n["params"]["level"] for n in notes if n["method"] == "notifications/message"]


def test_progress_and_logs_precede_the_result_on_an_event_stream(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app)
    response = client.call_tool(
        "steps", {}, meta={"progressToken": "p1", "io.modelcontextprotocol/logLevel": "info"}
    )
    assert response.http.mimetype == "text/event-stream"
    assert response.http.headers["Cache-Control"] == "no-cache"
    assert response.http.headers["X-Accel-Buffering"] == "no"
    assert _progress(response.notifications) == [1, 2, 3]
    assert {n["params"]["progressToken"] for n in response.notifications if "progressToken" in n["params"]} == {"p1"}
    assert _logs(response.notifications) == ["info", "error"]
    assert response.messages[-1]["result"]["content"][0]["text"] == "done"


def test_a_2026_request_without_log_level_or_progress_token_gets_plain_json(
    app: Flask, make_client: MakeClient
) -> None:
    response = make_client(app).call_tool("steps", {})
    assert response.http.mimetype == "application/json"
    assert response.notifications == []


def test_legacy_logs_follow_the_session_level(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-11-25")
    client.initialize()
    assert client.call_tool("steps", {}).notifications == []  # none before logging/setLevel
    assert client.request("logging/setLevel", {"level": "debug"}).result == {}
    assert _logs(client.call_tool("steps", {}).notifications) == ["debug", "info", "error"]
    client.request("logging/setLevel", {"level": "critical"})
    assert client.call_tool("steps", {}).notifications == []


def test_a_client_accepting_only_json_gets_the_result_without_notifications(app: Flask) -> None:
    from flask_mcp.testing import MCPTestClient

    client = MCPTestClient(app)
    response = client.call_tool("steps", {}, meta={"progressToken": 7}, headers={"Accept": "application/json"})
    assert response.http.mimetype == "application/json"
    assert response.result["content"][0]["text"] == "done"


def test_elicitation_round_trip_returns_input_required_then_the_result(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    first = client.call_tool("greet", {"punctuation": "?"}).result
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "who": {"method": "elicitation/create",
                "params": {"mode": "form", "message": "What is your name?", "requestedSchema": NAME}}
    }
    assert "ttlMs" not in first and "cacheScope" not in first
    second = client.request("tools/call", {
        "name": "greet", "arguments": {"punctuation": "?"}, "requestState": first["requestState"],
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
    })
    assert second.result["resultType"] == "complete"
    assert second.result["content"][0]["text"] == "Hello, Ada?"


def test_a_declined_elicitation_reaches_the_tool(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    first = client.call_tool("greet", {}).result
    done = client.request("tools/call", {
        "name": "greet", "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"who": {"action": "decline"}},
    }).result
    assert done["content"][0]["text"] == "No name given."


def test_missing_or_malformed_answers_are_asked_again(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    for responses in ({}, {"other": {"action": "accept"}}, {"who": {"action": "maybe"}}, {"who": "Ada"}):
        again = client.request("tools/call", {"name": "greet", "arguments": {}, "inputResponses": responses}).result
        assert again["resultType"] == "input_required"
        assert list(again["inputRequests"]) == ["who"]


def test_each_round_carries_earlier_answers_in_a_new_state(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}, "sampling": {}})
    r1 = client.call_tool("two_rounds", {}).result
    assert list(r1["inputRequests"]) == ["first"]
    r2 = client.request("tools/call", {
        "name": "two_rounds", "arguments": {}, "requestState": r1["requestState"],
        "inputResponses": {"first": {"action": "accept", "content": {"name": "Ada"}}},
    }).result
    assert list(r2["inputRequests"]) == ["second"]
    assert r2["inputRequests"]["second"]["method"] == "sampling/createMessage"
    assert r2["requestState"] != r1["requestState"]
    r3 = client.request("tools/call", {
        "name": "two_rounds", "arguments": {}, "requestState": r2["requestState"],
        "inputResponses": {"second": {"role": "assistant", "content": {"type": "text", "text": "hi"},
                                      "model": "m", "stopReason": "endTurn"}},
    }).result
    assert r3["content"][0]["text"] == "Ada: hi"


def test_several_questions_can_be_asked_in_one_round(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}, "sampling": {}, "roots": {}})
    r1 = client.call_tool("everything", {}).result
    assert sorted(r1["inputRequests"]) == ["n", "r", "s"]
    assert r1["inputRequests"]["r"] == {"method": "roots/list"}
    done = client.request("tools/call", {
        "name": "everything", "arguments": {}, "requestState": r1["requestState"],
        "inputResponses": {
            "n": {"action": "cancel"},
            "s": {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"},
            "r": {"roots": [{"uri": "file:///a"}, {"uri": "file:///b"}]},
        },
    }).result
    assert done["content"][0]["text"] == "cancel yo 2"


@pytest.mark.parametrize("change", ["tamper", "other_arguments", "garbage"])
def test_a_tampered_or_misapplied_request_state_is_refused(app: Flask, make_client: MakeClient, change: str) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    state = client.call_tool("greet", {"punctuation": "!"}).result["requestState"]
    arguments = {"punctuation": "!"}
    if change == "tamper":
        state = ("A" if state[0] != "A" else "B") + state[1:]
    elif change == "other_arguments":
        arguments = {"punctuation": "?"}
    else:
        state = "not-a-state"
    error = client.request("tools/call", {
        "name": "greet", "arguments": arguments, "requestState": state,
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Eve"}}},
    }).error
    assert error["code"] == -32602
    assert "requestState" in error["message"]


def test_an_expired_request_state_is_refused(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    state = client.call_tool("greet", {}).result["requestState"]
    methods = app.extensions["mcp"].server.methods
    real_clock = methods.clock
    methods.clock = lambda: real_clock() + 3600
    error = client.request("tools/call", {
        "name": "greet", "arguments": {}, "requestState": state,
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Eve"}}},
    }).error
    assert error["code"] == -32602
    assert "expired" in error["message"]


def test_asking_without_the_capability_is_refused_with_32021(app: Flask, make_client: MakeClient) -> None:
    response = make_client(app, capabilities={"sampling": {}}).call_tool("greet", {})
    assert response.status_code == 400
    assert response.error["code"] == -32021
    assert response.error["data"] == {"requiredCapabilities": {"elicitation": {}}}


def test_url_only_elicitation_clients_are_not_sent_forms(app: Flask, make_client: MakeClient) -> None:
    response = make_client(app, capabilities={"elicitation": {"url": {}}}).call_tool("greet", {})
    assert response.error["code"] == -32021


def test_without_a_secret_key_asking_fails_with_a_clear_error(make_client: MakeClient) -> None:
    app = Flask(__name__)
    mcp = MCP(app)

    @mcp.tool
    def ask(ctx: Context) -> str:
        return ctx.elicit("Name?", NAME).action

    error = make_client(app, capabilities={"elicitation": {}}).call_tool("ask", {}).error
    assert error["code"] == -32603
    assert "SECRET_KEY" in error["message"]


def test_a_legacy_session_is_asked_on_the_event_stream_and_answers_by_post(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-11-25", capabilities={"elicitation": {}})
    client.initialize()
    asked: list[dict[str, Any]] = []

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        asked.append(request)
        return {"action": "accept", "content": {"name": "Grace"}}

    client.on_request = answer
    response = client.call_tool("greet", {"punctuation": "."})
    assert response.http.mimetype == "text/event-stream"
    assert [m["method"] for m in asked] == ["elicitation/create"]
    assert asked[0]["params"] == {"message": "What is your name?", "requestedSchema": NAME}
    assert response.result["content"][0]["text"] == "Hello, Grace."


def test_several_legacy_questions_go_out_together(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-11-25", capabilities={"elicitation": {}, "sampling": {}, "roots": {}})
    client.initialize()
    answers: dict[str, dict[str, Any]] = {
        "elicitation/create": {"action": "decline"},
        "sampling/createMessage": {"role": "assistant", "content": {"type": "text", "text": "hey"}, "model": "m"},
        "roots/list": {"roots": [{"uri": "file:///x"}]},
    }
    client.on_request = lambda request: answers[request["method"]]
    assert client.call_tool("everything", {}).result["content"][0]["text"] == "decline hey 1"


def test_a_legacy_client_refusing_the_question_gives_an_error_result(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-06-18", capabilities={"elicitation": {}})
    client.initialize()
    result = client.call_tool("greet", {}).result  # the test client answers with an error by default
    assert result["isError"] is True
    assert "refused elicitation/create" in result["content"][0]["text"]


def test_an_unanswered_legacy_question_times_out_with_a_clear_error(app: Flask, make_client: MakeClient) -> None:
    app.extensions["mcp"].settings.__dict__["client_timeout"] = 0.3  # frozen settings: test-only change
    client = make_client(app, "2025-11-25", capabilities={"elicitation": {}})
    client.initialize()
    client.on_request = lambda request: (_ for _ in ()).throw(RuntimeError("never answered"))
    client._answer_server_request = lambda request: None  # type: ignore[method-assign]
    result = client.call_tool("greet", {}).result
    assert result["isError"] is True
    assert "did not answer elicitation/create within 0.3 s" in result["content"][0]["text"]


def test_a_legacy_cancellation_stops_the_tool_and_nothing_more_is_sent(make_client: MakeClient) -> None:
    app = Flask(__name__)
    mcp = MCP(app)
    progress_after_cancel: list[bool] = []

    @mcp.tool
    def slow(ctx: Context) -> str:
        """Waits for a question, then reports progress."""
        ctx.elicit("Go on?", NAME)
        progress_after_cancel.append(True)
        ctx.report_progress(1)
        return "finished"

    client = make_client(app, "2025-11-25", capabilities={"elicitation": {}})
    client.initialize()

    def cancel_then_answer(request: dict[str, Any]) -> dict[str, Any]:
        client.notify("notifications/cancelled", {"requestId": 2, "reason": "user"})
        return {"action": "accept", "content": {"name": "x"}}

    client.on_request = cancel_then_answer
    response = client.call_tool("slow", {}, id=2)
    assert [m.get("method") for m in response.messages] == ["elicitation/create"]
    assert progress_after_cancel == []


def test_a_broad_except_in_a_tool_does_not_swallow_the_question(make_client: MakeClient) -> None:
    app = Flask(__name__)
    app.config["SECRET_KEY"] = "s"
    mcp = MCP(app)

    @mcp.tool
    def careless(ctx: Context) -> str:
        try:
            return ctx.elicit("Name?", NAME).action
        except Exception:
            return "swallowed"

    result = make_client(app, capabilities={"elicitation": {}}).call_tool("careless", {}).result
    assert result["resultType"] == "input_required"


def test_current_session_data_is_kept_between_calls_of_a_legacy_session(make_client: MakeClient, tmp_path: Any) -> None:
    from flask_mcp import current_session

    app = Flask(__name__)
    app.config["MCP_BACKEND"] = f"sqlite:///{tmp_path}/s.sqlite3"
    mcp = MCP(app)

    @mcp.tool
    def count() -> int:
        """Counts calls in this session."""
        if not current_session:
            return -1
        current_session.data["calls"] = current_session.data.get("calls", 0) + 1
        return int(current_session.data["calls"])

    legacy = make_client(app, "2025-11-25")
    legacy.initialize()
    assert [legacy.call_tool("count", {}).result["structuredContent"]["result"] for _ in range(3)] == [1, 2, 3]
    other = make_client(app, "2025-06-18")
    other.initialize()
    assert other.call_tool("count", {}).result["structuredContent"]["result"] == 1
    assert make_client(app).call_tool("count", {}).result["structuredContent"]["result"] == -1


def test_closing_a_2026_stream_cancels_the_call(make_client: MakeClient) -> None:
    import threading
    import time

    app = Flask(__name__)
    mcp = MCP(app)
    stopped_at: list[int] = []
    done = threading.Event()

    @mcp.tool
    def ticker(ctx: Context) -> str:
        """Reports progress for a while."""
        step = 0
        try:
            for step in range(1, 500):
                ctx.report_progress(step)
                time.sleep(0.005)
            return "finished"
        finally:
            stopped_at.append(step)
            done.set()

    client = make_client(app)
    params = {"name": "ticker", "arguments": {}, "_meta": {**client.request_meta(), "progressToken": "t"}}
    http = client.client.post(
        "/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params},
        headers={"Accept": "application/json, text/event-stream", **client.standard_headers("tools/call", params)},
        buffered=False,
    )
    chunks = http.iter_encoded()
    assert b"notifications/progress" in next(chunks)
    http.close()  # the client goes away
    assert done.wait(5)
    assert stopped_at[0] < 499


def test_a_tool_that_changes_its_arguments_before_asking_can_be_answered(app: Flask, make_client: MakeClient) -> None:
    mcp: MCP = app.extensions["mcp"].extension

    @mcp.tool
    def tidy(ctx: Context, items: Any) -> str:
        """Sorts its list in place, then asks."""
        items.sort()
        answer = ctx.elicit("Sure?", NAME, key="ok")
        return f"{items} for {answer.content['name'] if answer.content else '?'}"

    client = make_client(app, capabilities={"elicitation": {}})
    first = client.call_tool("tidy", {"items": [3, 1, 2]}).result
    assert first["resultType"] == "input_required"
    done = client.request("tools/call", {
        "name": "tidy", "arguments": {"items": [3, 1, 2]}, "requestState": first["requestState"],
        "inputResponses": {"ok": {"action": "accept", "content": {"name": "Ada"}}},
    }).result
    assert done["content"][0]["text"] == "[1, 2, 3] for Ada"
