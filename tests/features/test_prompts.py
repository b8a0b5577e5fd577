"""Prompts: registration, arguments from the signature, listing per revision,
rendering return values into messages, argument errors, and multi round-trip
prompts (spec digest sections 5.5 and 5.13)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask
from pydantic import Field

from flask_mcp import (
    MCP,
    AssistantMessage,
    Context,
    EmbeddedResource,
    Image,
    Message,
    ResourceLink,
    UserMessage,
)
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
LEGACY = ALL[1:]
PNG = b"\x89PNG\r\n\x1a\n fake image bytes"
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png"}


@pytest.fixture
def mcp() -> MCP:
    return MCP(name="prompts-server", version="0.1.0")


@pytest.fixture
def app(app: Flask, mcp: MCP) -> Flask:
    """The root conftest's app, serving this module's ``mcp``."""
    app.config["SECRET_KEY"] = "test-secret"
    app.config["MCP_BACKEND"] = "memory://"
    mcp.init_app(app)
    return app


def get(client: MCPTestClient, name: str, arguments: dict[str, Any] | None = None) -> Any:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    return client.request("prompts/get", params)


def messages(client: MCPTestClient, name: str, arguments: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return get(client, name, arguments).result["messages"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- registration


def test_bare_decorator_returns_the_function_unchanged(mcp: MCP) -> None:
    def review(code: str) -> str:
        return f"Review {code}"

    assert mcp.prompt(review) is review
    assert review("x") == "Review x"
    assert "review" in mcp.prompts


def test_a_name_can_be_given_positionally_or_by_keyword(mcp: MCP) -> None:
    def impl() -> str:
        return ""

    assert mcp.prompt("first")(impl) is impl
    assert mcp.prompt(name="second", title="Second")(impl) is impl
    assert {"first", "second"} <= {p["name"] for p in mcp.prompts.definitions()}
    assert "impl" not in mcp.prompts


@pytest.mark.parametrize("name", ["has space", "slash/name", "", "x" * 129])
def test_an_invalid_prompt_name_raises_at_decoration(mcp: MCP, name: str) -> None:
    with pytest.raises(ValueError, match="name"):
        mcp.prompt(name=name)(lambda: "")


def test_var_arguments_raise_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="Prompt 'spread'"):

        @mcp.prompt
        def spread(*words: str) -> str:
            return ""


def test_a_duplicate_prompt_name_raises_and_keeps_the_first(mcp: MCP) -> None:
    mcp.prompt(name="p")(lambda: "first")
    with pytest.raises(ValueError, match="'p'"):
        mcp.prompt(name="p")(lambda: "second")
    assert len(mcp.prompts) == 1


def test_prompts_can_be_added_and_removed_at_run_time(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    heard: list[str] = []
    mcp.prompts.on_list_changed.append(heard.append)
    mcp.add_prompt(lambda: "late", name="late")
    client = make_client(app)
    assert [p["name"] for p in client.request("prompts/list").result["prompts"]] == ["late"]
    mcp.remove_prompt("late")
    assert heard == ["prompts", "prompts"]
    assert client.request("prompts/list").error["code"] == -32601  # nothing left: no capability


# ---------------------------------------------------------------------- capability and listing


def test_without_prompts_the_capability_is_absent_and_the_methods_are_not_found(
    make_client: MakeClient, app: Flask
) -> None:
    client = make_client(app)
    assert "prompts" not in client.discover().result["capabilities"]
    response = client.request("prompts/list")
    assert (response.status_code, response.error["code"]) == (404, -32601)
    legacy = connect(make_client, app, "2025-06-18")
    response = legacy.request("prompts/get", {"name": "x"})
    assert (response.status_code, response.error["code"]) == (200, -32601)


def test_the_capability_says_list_changes_only_where_they_are_delivered(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    mcp.prompt(name="x")(lambda: "x")
    assert make_client(app).discover().result["capabilities"]["prompts"] == {"listChanged": True}
    assert connect(make_client, app, "2025-11-25").initialize().result["capabilities"]["prompts"] == {}


def test_arguments_come_from_the_signature_with_their_descriptions(make_client: MakeClient, app: Flask,
                                                                    mcp: MCP) -> None:
    @mcp.prompt
    def review(
        code: Annotated[str, Field(description="The code to review")],
        language: str,
        strict: bool = False,
    ) -> str:
        """Review some code.

        Args:
            language: the programming language
        """
        return ""

    [prompt] = make_client(app).request("prompts/list").result["prompts"]
    assert prompt == {
        "name": "review",
        "description": "Review some code.",
        "arguments": [
            {"name": "code", "description": "The code to review", "required": True},
            {"name": "language", "description": "the programming language", "required": True},
            {"name": "strict", "required": False},
        ],
    }


def test_a_prompt_without_a_docstring_is_described_by_its_name(make_client: MakeClient, app: Flask,
                                                                 mcp: MCP) -> None:
    mcp.prompt(name="bare")(lambda: "")
    assert make_client(app).request("prompts/list").result["prompts"] == [{"name": "bare", "description": "bare"}]


@pytest.mark.parametrize("version", ALL)
def test_a_listing_carries_what_each_revision_defines(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str
) -> None:
    @mcp.prompt(title="Greeting", icons=[ICON], meta={"k": "v"})
    def greet(name: Annotated[str, Field(title="Name", description="Who")]) -> str:
        """Greets."""
        return f"Hello {name}"

    [prompt] = connect(make_client, app, version).request("prompts/list").result["prompts"]
    argument: dict[str, Any] = {"name": "name", "description": "Who", "required": True}
    expected: dict[str, Any] = {"name": "greet", "description": "Greets.", "arguments": [argument]}
    if version != "2025-03-26":
        expected |= {"title": "Greeting", "_meta": {"k": "v"}}
        argument["title"] = "Name"
    if version in ("2025-11-25", "2026-07-28"):
        expected["icons"] = [ICON]
    assert prompt == expected


def test_2026_prompt_listings_carry_caching_hints(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.prompt(name="x")(lambda: "x")
    result = make_client(app).request("prompts/list").result
    assert (result["ttlMs"], result["cacheScope"]) == (60_000, "public")
    assert "ttlMs" not in connect(make_client, app, "2025-11-25").request("prompts/list").result


# ---------------------------------------------------------------------- rendering


@pytest.mark.parametrize("version", ALL)
def test_a_string_is_one_user_text_message(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    @mcp.prompt
    def hello() -> str:
        """Says hello."""
        return "Hello!"

    result = get(connect(make_client, app, version), "hello").result
    assert result["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello!"}}]
    assert result["description"] == "Says hello."


def test_message_helpers_and_dicts_keep_their_roles(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def chat() -> list[Any]:
        return [
            UserMessage("Question?"),
            AssistantMessage("Answer."),
            Message("user", {"type": "text", "text": "as a block"}),
            {"role": "assistant", "content": "from a dict"},
        ]

    assert messages(make_client(app), "chat") == [
        {"role": "user", "content": {"type": "text", "text": "Question?"}},
        {"role": "assistant", "content": {"type": "text", "text": "Answer."}},
        {"role": "user", "content": {"type": "text", "text": "as a block"}},
        {"role": "assistant", "content": {"type": "text", "text": "from a dict"}},
    ]


def test_images_and_embedded_resources_become_content_blocks(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def look(uri: str) -> list[Any]:
        return [Image(PNG), EmbeddedResource(uri, text="body", mime_type="text/plain"), "What do you see?"]

    image, resource, text = messages(make_client(app), "look", {"uri": "app://doc"})
    assert image["role"] == "user"
    assert image["content"]["type"] == "image"
    assert base64.b64decode(image["content"]["data"]) == PNG
    assert resource["content"] == {
        "type": "resource", "resource": {"uri": "app://doc", "mimeType": "text/plain", "text": "body"},
    }
    assert text["content"] == {"type": "text", "text": "What do you see?"}


@pytest.mark.parametrize("version", ALL)
def test_resource_links_exist_from_2025_06_18(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    mcp.prompt(name="linked")(lambda: ResourceLink("app://doc", "doc"))
    [message] = messages(connect(make_client, app, version), "linked")
    if version == "2025-03-26":
        assert message["content"] == {"type": "text", "text": "doc: app://doc"}
    else:
        assert message["content"] == {"type": "resource_link", "uri": "app://doc", "name": "doc"}


def test_other_values_are_sent_as_json_text(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.prompt(name="data")(lambda: {"a": 1})
    [message] = messages(make_client(app), "data")
    assert json.loads(message["content"]["text"]) == {"a": 1}


def test_typed_arguments_are_coerced_from_strings(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def repeat(word: str, times: int, loud: bool = False) -> str:
        text = " ".join([word] * times)
        return text.upper() if loud else text

    client = make_client(app)
    assert messages(client, "repeat", {"word": "hi", "times": "3", "loud": "true"})[0]["content"]["text"] == "HI HI HI"
    assert messages(client, "repeat", {"word": "hi", "times": "2"})[0]["content"]["text"] == "hi hi"


def test_a_prompt_function_gets_its_context(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def whoami(ctx: Context) -> str:
        return f"{ctx.method} for {ctx.client_info.get('name')}"

    assert messages(make_client(app), "whoami")[0]["content"]["text"] == "prompts/get for flask-mcp-test-client"


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("version", ALL)
def test_a_missing_required_argument_is_invalid_params_naming_it(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str
) -> None:
    mcp.prompt(name="pair")(lambda arg1, arg2: f"{arg1} {arg2}")
    error = get(connect(make_client, app, version), "pair", {"arg1": "a"}).error
    assert error["code"] == -32602
    assert "'pair'" in error["message"] and "arg2" in error["message"] and "missing" in error["message"]


def test_a_value_that_does_not_fit_its_type_is_invalid_params(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def count(n: int) -> str:
        return str(n)

    error = get(make_client(app), "count", {"n": "many"}).error
    assert error["code"] == -32602 and "n:" in error["message"]


def test_an_unknown_argument_is_invalid_params(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.prompt(name="plain")(lambda: "x")
    assert get(make_client(app), "plain", {"surprise": "!"}).error["code"] == -32602


@pytest.mark.parametrize("params", [{"name": "nope"}, {}, {"name": "plain", "arguments": ["a"]}])
def test_an_unknown_prompt_or_malformed_request_is_invalid_params(
    make_client: MakeClient, app: Flask, mcp: MCP, params: dict[str, Any]
) -> None:
    mcp.prompt(name="plain")(lambda: "x")
    response = connect(make_client, app, "2025-11-25").request("prompts/get", params)
    assert (response.status_code, response.error["code"]) == (200, -32602)


def test_a_failing_prompt_is_an_internal_error_without_internals(
    make_client: MakeClient, app: Flask, mcp: MCP, caplog: pytest.LogCaptureFixture
) -> None:
    @mcp.prompt
    def broken() -> str:
        raise RuntimeError("db-password-hunter2")

    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        response = get(make_client(app), "broken")
    assert response.error["code"] == -32603
    assert "hunter2" not in json.dumps(response.message)
    assert "hunter2" in caplog.text


def test_a_message_with_a_bad_role_is_an_internal_error(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.prompt(name="odd")(lambda: {"role": "system", "content": "x"})
    assert get(make_client(app), "odd").error["code"] == -32603


# ---------------------------------------------------------------------- multi round-trip


def test_a_prompt_can_ask_the_client_and_then_be_returned(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    schema = {"type": "object", "properties": {"context": {"type": "string"}}, "required": ["context"]}

    @mcp.prompt
    def contextual(topic: str, ctx: Context) -> str:
        answer = ctx.elicit("What context should the prompt use?", schema, key="user_context")
        return f"{topic} in {(answer.content or {}).get('context')}"

    client = make_client(app, capabilities={"elicitation": {}})
    first = get(client, "contextual", {"topic": "flask"}).result
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["user_context"]["params"]["message"] == "What context should the prompt use?"
    second = client.request("prompts/get", {
        "name": "contextual", "arguments": {"topic": "flask"}, "requestState": first["requestState"],
        "inputResponses": {"user_context": {"action": "accept", "content": {"context": "testing"}}},
    }).result
    assert second["messages"] == [{"role": "user", "content": {"type": "text", "text": "flask in testing"}}]
    # The state is bound to the prompt's arguments: other arguments cannot reuse it.
    error = client.request("prompts/get", {
        "name": "contextual", "arguments": {"topic": "django"}, "requestState": first["requestState"],
        "inputResponses": {"user_context": {"action": "accept", "content": {"context": "x"}}},
    }).error
    assert error["code"] == -32602


def test_asking_without_the_capability_is_refused_with_32021(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.prompt
    def needs(ctx: Context) -> str:
        return ctx.sample("Say hi", max_tokens=5)["content"]["text"]  # type: ignore[no-any-return]

    response = get(make_client(app), "needs")
    assert (response.status_code, response.error["code"]) == (400, -32021)
    legacy = get(connect(make_client, app, "2025-11-25"), "needs")
    assert (legacy.status_code, legacy.error["code"]) == (200, -32021)
