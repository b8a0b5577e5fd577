"""A small app for the ``flask mcp`` command tests: tools of every kind the
commands must print, a resource, a template, a prompt, and an MCP App view
with one tool linked to it and one the view may not call; and the helpers
the command tests share.

    flask --app tests/cli_app.py mcp list
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import redis
from conftest import FakeClock, shared_redis
from flask import Flask
from pydantic import BaseModel, Field

from flask_mcp import MCP, Context, Text, ToolError, ToolResult
from flask_mcp.auth import Principal
from flask_mcp.backends.contracts import Backend
from flask_mcp.backends.redis import RedisMessageBus, RedisSessionStore, RedisTaskStore

VIEW = """<!doctype html>
<html><head><meta charset="utf-8"><title>counter</title></head>
<body><p id="status">no result yet</p>
<script>
  window.addEventListener("message", (event) => {
    const message = event.data;
    if (message && message.method === "ui/notifications/tool-result") {
      document.getElementById("status").textContent = `count: ${message.params.structuredContent.count}`;
    }
  });
</script></body></html>
"""


class Echoed(BaseModel):
    arguments: dict[str, Any]


class Count(BaseModel):
    count: int


def create_app(**config: Any) -> Flask:
    app = Flask("cli_app")
    app.config.update({"TESTING": True, "MCP_BACKEND": "memory://", **config})
    mcp = MCP(app, name="cli-test", version="2.0.0", title="CLI test server")

    @mcp.tool(annotations={"readOnlyHint": True})
    def echo(
        code: str,
        limit: int = 5,
        ratio: float | None = None,
        flag: bool = False,
        tags: list[str] | None = None,
        anything: Any = None,
    ) -> Echoed:
        """Return the arguments as the tool received them.

        A second line that the compact listing leaves out.
        """
        return Echoed(arguments={"code": code, "limit": limit, "ratio": ratio, "flag": flag, "tags": tags,
                                 "anything": anything})

    @mcp.tool
    def greet(name: Annotated[str, Field(min_length=1)]) -> str:
        """Say hello."""
        return f"Hello, {name}!"

    @mcp.tool
    def fail(reason: str) -> str:
        """Always fails, with the reason given."""
        raise ToolError(f"failed on purpose: {reason}")

    @mcp.tool
    def mixed() -> ToolResult:
        """Text and structured content that differ."""
        return ToolResult([Text("a note for the model")], structured={"answer": 42})

    @mcp.tool
    def ask_first(ctx: Context) -> str:
        """Asks the client a question before answering."""
        answer = ctx.elicit("Proceed?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
        return f"answered {answer.action}"

    @mcp.tool(scopes=["admin"])
    def whoami(ctx: Context) -> str:
        """Who is calling (needs the admin scope)."""
        principal = ctx.principal
        return "nobody" if principal is None else f"{principal.subject} {sorted(principal.scopes)}"

    @mcp.tool(task="required")
    def add_later(a: int, b: int, ctx: Context) -> int:
        """Adds, as a task."""
        ctx.set_task_status("adding")
        return a + b

    @mcp.tool(task="optional")
    def maybe_task(ctx: Context) -> str:
        """Runs as a task when the client declares them."""
        return f"task id: {ctx.task_id}"

    @mcp.tool(ui="ui://cli/counter")
    def count(start: int = 0) -> Count:
        """Count one up from start."""
        return Count(count=start + 1)

    @mcp.tool(ui="ui://cli/counter", visibility=["model"])
    def model_only() -> str:
        """Only the model may call this, not the view."""
        return "model only"

    @mcp.resource("cli://notes", mime_type="text/plain", title="Notes")
    def notes() -> str:
        """Some notes."""
        return "notes"

    @mcp.resource("cli://items/{item}", mime_type="application/json")
    def item(item: str) -> dict[str, str]:
        """One item."""
        return {"item": item}

    @mcp.prompt(title="Summarise")
    def summarise(text: str, style: str = "short") -> str:
        """Summarise a text."""
        return f"Summarise in a {style} way: {text}"

    @mcp.ui_resource("ui://cli/counter", title="Counter", csp={"connectDomains": ["https://api.example.com"]})
    def counter() -> str:
        """The counter view."""
        return VIEW

    return app


def auth_app() -> Flask:
    """The app with MCP_AUTH on: ``good-token`` is alice's (without scopes), any other token is refused."""
    app = create_app(MCP_AUTH=True, MCP_RESOURCE_URL="https://cli.example.com/mcp")
    mcp: MCP = app.extensions["mcp"].extension

    @mcp.token_verifier
    def verify(token: str) -> Principal | None:
        return Principal(subject="alice") if token == "good-token" else None

    return app


def runner_for(app: Flask) -> Callable[..., Any]:
    """``run("list", "--json")``: ``flask mcp list --json`` through click's runner."""
    runner = app.test_cli_runner()

    def run(*args: str, input: str | None = None) -> Any:
        return runner.invoke(args=["mcp", *args], input=input)

    return run


@contextmanager
def redis_test_backend() -> Iterator[tuple[Backend, redis.Redis, str]]:
    """A real Redis backend under keys (and channels) of its own, deleted afterwards."""
    client = shared_redis()
    prefix = f"flask-mcp-test:{uuid.uuid4().hex}:"

    def check() -> None:
        client.ping()

    backend = Backend(
        sessions=RedisSessionStore(client, timeout=3600, key_prefix=prefix + "session:", clock=FakeClock()),
        bus=RedisMessageBus(client, channel_prefix=prefix + "bus:"),
        tasks=RedisTaskStore(client, key_prefix=prefix + "task:"),
        description="redis (test keys)",
        check=check,
    )
    try:
        yield backend, client, prefix
    finally:
        keys = list(client.scan_iter(match=prefix + "*"))
        if keys:
            client.delete(*keys)
        client.close()


app = create_app()
