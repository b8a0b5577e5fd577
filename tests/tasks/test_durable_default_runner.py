"""The thread runner stays the default (issue #33): without ``MCP_TASK_RUNNER``,
``@mcp.tool(durable=True)`` changes nothing. The call runs in the web worker's
request thread, and a 2025-11-25 session gets the very stream a plain tool
gives: the same messages, primed and with ids, in the same order."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from conftest import connect
from flask import Flask

from flask_mcp import MCP, Context
from flask_mcp.testing import MCPTestClient

LEGACY = "2025-11-25"


def counting_app(*, durable: bool) -> Flask:
    app = Flask(__name__)
    app.config.update({"MCP_BACKEND": "memory://", "TESTING": True})
    mcp = MCP(app, name="default-runner", version="1.0")

    @mcp.tool(durable=durable)
    def count(n: int, ctx: Context) -> dict[str, Any]:
        """Reports ``n`` steps; says which thread ran it."""
        for i in range(1, n + 1):
            ctx.report_progress(i, n, f"step {i}")
        return {"counted": n, "thread": threading.current_thread().name}

    return app


def without_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in message.items() if k != "id"} for message in messages]


def test_a_durable_tool_on_the_default_runner_streams_as_a_plain_tool_does(
    make_client: Callable[..., MCPTestClient],
) -> None:
    answers = []
    for durable in (False, True):
        app = counting_app(durable=durable)
        assert app.config["MCP_TASK_RUNNER"] == "thread"  # nothing set: the default filled in
        client = connect(make_client, app, LEGACY)
        answers.append(client.call_tool("count", {"n": 3}, meta={"progressToken": "p"}))
    plain, durable_answer = answers
    assert durable_answer.http.mimetype == plain.http.mimetype == "text/event-stream"
    assert without_ids(durable_answer.messages) == without_ids(plain.messages)
    progress = [m["params"]["progress"] for m in durable_answer.messages if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3]
    # Run here, in the thread the web worker gave the request (not on a queue worker).
    assert durable_answer.result["structuredContent"] == {"counted": 3, "thread": "flask-mcp-request"}
    first_block = durable_answer.http.data.split(b"\n\n")[0]
    assert first_block.startswith(b"id: ") and b"data: " in first_block  # primed, as before
