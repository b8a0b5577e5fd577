"""``async def`` wherever an app registers a function: tools, resources and
templates, prompts, completions, instructions and token verifiers run as Flask
runs async views (``app.ensure_sync``), with the request's context and the
call's ``Context`` inside; a missing asgiref is refused at registration."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from typing import Any

import pytest
from flask import Flask, current_app, g

from flask_mcp import MCP, Context, ToolError
from flask_mcp.auth import Principal
from flask_mcp.coroutines import is_async, synced
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}

NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
def app(app: Flask) -> Flask:
    app.config["SECRET_KEY"] = "test-secret"
    mcp = MCP(app, name="coroutines", version="1.0")

    @mcp.tool
    async def add(a: int, b: int) -> int:
        """Adds, after yielding to its event loop once."""
        await asyncio.sleep(0)
        return a + b

    @mcp.tool
    async def where(ctx: Context) -> dict[str, Any]:
        """What the coroutine sees of Flask and of the call."""
        g.seen = "set inside"
        await ctx.areport_progress(1, 2, "half")
        ctx.info("from a coroutine")
        await ctx.areport_progress(2, 2)
        return {"app": current_app.name, "g": g.seen, "method": ctx.method,
                "in_a_coroutine": asyncio.current_task() is not None}

    @mcp.tool
    async def refuse() -> str:
        raise ToolError("No, and here is why.")

    @mcp.tool
    async def greet(ctx: Context) -> str:
        answer = await ctx.aelicit("What is your name?", NAME, key="who")
        return f"Hello, {answer.content['name']}!" if answer.accepted and answer.content else "Hello?"

    @mcp.resource("notes://today")
    async def today() -> str:
        await asyncio.sleep(0)
        return "Water the plants."

    @mcp.resource("notes://{day}")
    async def note(day: str) -> str:
        return f"Nothing planned on {day}."

    @mcp.prompt
    async def explain(topic: str, style: str = "brief") -> str:
        return f"Explain {topic}, {style}."

    @mcp.completion(prompt="explain", argument="style")
    async def styles(value: str) -> list[str]:
        return [s for s in ("brief", "broad") if s.startswith(value)]

    @mcp.instructions
    async def instructions(ctx: Context) -> str:
        return f"Served over {ctx.protocol_version}."

    return app


def test_an_async_tool_answers_on_every_revision(app: Flask, make_client: MakeClient) -> None:
    assert make_client(app).call_tool("add", {"a": 2, "b": 3}).result["structuredContent"] == {"result": 5}
    legacy = make_client(app, "2025-11-25")
    legacy.initialize()
    assert legacy.call_tool("add", {"a": 2, "b": 3}).result["structuredContent"] == {"result": 5}


def test_an_async_tool_sees_the_app_g_and_its_context_and_its_progress_streams(
    app: Flask, make_client: MakeClient
) -> None:
    response = make_client(app).call_tool(
        "where", {}, meta={"progressToken": "p", "io.modelcontextprotocol/logLevel": "info"}
    )
    assert response.result["structuredContent"] == {
        "app": app.name, "g": "set inside", "method": "tools/call", "in_a_coroutine": True,
    }
    methods = [(n["method"], n["params"].get("progress")) for n in response.notifications]
    assert methods == [("notifications/progress", 1), ("notifications/message", None),
                       ("notifications/progress", 2)]


def test_a_tool_error_from_a_coroutine_is_an_error_result(app: Flask, make_client: MakeClient) -> None:
    result = make_client(app).call_tool("refuse", {}).result
    assert result["isError"] is True
    assert result["content"] == [{"type": "text", "text": "No, and here is why."}]


def test_an_async_tool_awaits_a_question_over_2026_round_trips(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, capabilities={"elicitation": {}})
    first = client.call_tool("greet", {}).result
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["who"]["params"]["message"] == "What is your name?"
    second = client.request("tools/call", {
        "name": "greet", "arguments": {}, "requestState": first["requestState"],
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
    })
    assert second.result["content"][0]["text"] == "Hello, Ada!"


def test_an_async_tool_awaits_a_question_on_a_legacy_stream(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-11-25", capabilities={"elicitation": {}})
    client.initialize()
    client.on_request = lambda request: {"action": "accept", "content": {"name": "Grace"}}
    response = client.call_tool("greet", {})
    assert response.http.mimetype == "text/event-stream"
    assert response.result["content"][0]["text"] == "Hello, Grace!"


def test_async_resources_templates_prompts_completions_and_instructions(app: Flask, make_client: MakeClient) -> None:
    client = make_client(app, "2025-11-25")
    assert client.initialize().result["instructions"] == "Served over 2025-11-25."
    assert client.read_resource("notes://today").result["contents"][0]["text"] == "Water the plants."
    assert client.read_resource("notes://friday").result["contents"][0]["text"] == "Nothing planned on friday."
    got = client.get_prompt("explain", {"topic": "flask"}).result
    assert got["messages"][0]["content"]["text"] == "Explain flask, brief."
    completed = client.complete({"type": "ref/prompt", "name": "explain"}, {"name": "style", "value": "br"}).result
    assert completed["completion"]["values"] == ["brief", "broad"]


def test_a_registered_coroutine_function_is_returned_unchanged(app: Flask) -> None:
    mcp = MCP()

    async def double(n: int) -> int:
        return 2 * n

    assert mcp.tool(double) is double
    assert asyncio.run(double(4)) == 8  # still a plain coroutine function, callable in a unit test


def test_an_async_token_verifier_checks_tokens(make_client: MakeClient) -> None:
    app = Flask(__name__)
    app.config.update(MCP_AUTH=True, MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP(app)

    @mcp.token_verifier
    async def verify(token: str) -> Principal | None:
        await asyncio.sleep(0)
        return Principal(subject="ada") if token == "good" else None

    @mcp.tool
    def whoami(ctx: Context) -> str:
        return ctx.principal.subject if ctx.principal else "nobody"

    answered = make_client(app, headers=bearer("good")).call_tool("whoami", {})
    assert answered.result["content"][0]["text"] == "ada"
    assert make_client(app, headers=bearer("bad")).call_tool("whoami", {}).http.status_code == 401


def test_a_verifier_object_with_an_async_verify_method_checks_tokens(make_client: MakeClient) -> None:
    class Tokens:
        async def verify(self, token: str) -> Principal | None:
            return Principal(subject="grace") if token == "good" else None

    app = Flask(__name__)
    app.config.update(MCP_AUTH=True, MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP(app)
    mcp.token_verifier(Tokens())  # an object with verify(), as MCP_TOKEN_VERIFIER may name

    @mcp.tool
    def whoami(ctx: Context) -> str:
        return ctx.principal.subject if ctx.principal else "nobody"

    answered = make_client(app, headers=bearer("good")).call_tool("whoami", {})
    assert answered.result["content"][0]["text"] == "grace"
    assert make_client(app, headers=bearer("bad")).call_tool("whoami", {}).http.status_code == 401


def test_the_apps_own_ensure_sync_runs_the_coroutines(make_client: MakeClient) -> None:
    """As for async views: an app that overrides ``ensure_sync`` decides how coroutines run."""
    ran: list[str] = []

    class CountingFlask(Flask):
        def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
            if asyncio.iscoroutinefunction(func):
                ran.append(func.__name__)
            return super().ensure_sync(func)

    app = CountingFlask(__name__)
    app.config.update(MCP_BACKEND="memory://", TESTING=True)
    mcp = MCP(app)

    @mcp.tool
    async def hello() -> str:
        return "hi"

    assert make_client(app).call_tool("hello", {}).result["content"][0]["text"] == "hi"
    assert ran == ["hello"]


@pytest.mark.parametrize("register", ["tool", "resource", "prompt", "instructions", "token_verifier", "completion"])
def test_without_asgiref_an_async_function_is_refused_when_registered(
    monkeypatch: pytest.MonkeyPatch, register: str
) -> None:
    monkeypatch.setitem(sys.modules, "asgiref", None)  # what an environment without it imports: nothing
    mcp = MCP()

    async def fn(value: str = "") -> str:
        return value

    def sync_fn(value: str = "") -> str:
        return value

    registrations: dict[str, Callable[[Callable[..., Any]], Any]] = {
        "tool": mcp.tool,
        "resource": lambda f: mcp.resource("notes://{value}")(f),
        "prompt": mcp.prompt,
        "instructions": mcp.instructions,
        "token_verifier": mcp.token_verifier,
        "completion": lambda f: mcp.completion(prompt="sync_fn", argument="value")(f),
    }
    if register == "completion":
        mcp.prompt(sync_fn)
    with pytest.raises(RuntimeError, match=r'async def function: .*pip install "flask\[async\]"'):
        registrations[register](fn)
    if register != "completion":
        registrations[register](sync_fn)  # plain functions need nothing more


def test_is_async_recognises_partials_and_objects_with_an_async_call() -> None:
    async def coroutine_function(a: int) -> int:
        return a

    class Callable_:  # noqa: N801 - a name that says what it is
        async def __call__(self, a: int) -> int:
            return a

    assert is_async(coroutine_function)
    assert is_async(functools.partial(coroutine_function, 1))
    assert is_async(Callable_())
    assert not is_async(lambda a: a)
    assert not is_async(Callable_)  # the class itself makes an instance, not a coroutine
    assert synced(len, "len") is len  # a plain function is left as it is


def test_a_synced_coroutine_keeps_its_name_and_signature(app: Flask) -> None:
    async def lookup(key: str, default: int = 0) -> int:
        """Find a value."""
        return default

    run = synced(lookup, "Tool 'lookup'")
    assert run.__name__ == "lookup" and run.__doc__ == "Find a value."
    import inspect

    assert str(inspect.signature(run)) == str(inspect.signature(lookup))
    with app.app_context():
        assert run("k", default=3) == 3
