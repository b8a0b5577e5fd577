"""Completions: suggestions for prompt and resource-template arguments
(``completion/complete``, spec digest section 5.6)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask

from flask_mcp import MCP, Completion, Context
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
LANGUAGES = ["python", "perl", "php", "rust", "ruby"]


@pytest.fixture
def mcp() -> MCP:
    mcp = MCP(name="completions-server", version="0.1.0")

    @mcp.prompt(complete={"language": LANGUAGES})
    def review(language: str, framework: str = "") -> str:
        """Review code."""
        return f"Review {language} {framework}"

    @mcp.resource("repo://{owner}/{name}")
    def repo(owner: str, name: str) -> str:
        return f"{owner}/{name}"

    return mcp


@pytest.fixture
def app(app: Flask, mcp: MCP) -> Flask:
    """The root conftest's app, serving this module's ``mcp``."""
    app.config["MCP_BACKEND"] = "memory://"
    mcp.init_app(app)
    return app


def complete(client: MCPTestClient, ref: dict[str, Any], name: str, value: str, **extra: Any) -> Any:
    return client.request("completion/complete", {"ref": ref, "argument": {"name": name, "value": value}, **extra})


PROMPT = {"type": "ref/prompt", "name": "review"}
TEMPLATE = {"type": "ref/resource", "uri": "repo://{owner}/{name}"}


@pytest.mark.parametrize("version", ALL)
def test_a_fixed_list_is_offered_by_prefix(make_client: MakeClient, app: Flask, version: str) -> None:
    result = complete(connect(make_client, app, version), PROMPT, "language", "P").result
    assert result["completion"] == {"values": ["python", "perl", "php"]}


def test_the_capability_is_declared_once_a_completer_exists(make_client: MakeClient, app: Flask) -> None:
    assert make_client(app).discover().result["capabilities"]["completions"] == {}
    assert connect(make_client, app, "2025-06-18").initialize().result["capabilities"]["completions"] == {}


def test_without_completers_there_is_no_capability_and_no_method(make_client: MakeClient) -> None:
    app = Flask(__name__)
    mcp = MCP(app)
    mcp.prompt(name="p")(lambda language: language)
    client = make_client(app)
    assert "completions" not in client.discover().result["capabilities"]
    response = complete(client, {"type": "ref/prompt", "name": "p"}, "language", "")
    assert (response.status_code, response.error["code"]) == (404, -32601)


def test_a_decorated_completer_gets_the_value_and_the_other_arguments(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    seen: list[Any] = []

    @mcp.completion(resource="repo://{owner}/{name}", argument="name")
    def repo_names(value: str, arguments: dict[str, str]) -> list[str]:
        seen.append((value, arguments))
        repos = {"pallets": ["flask", "jinja", "click"], "psf": ["requests"]}
        return [r for r in repos.get(arguments.get("owner", ""), []) if r.startswith(value)]

    client = make_client(app)
    result = complete(client, TEMPLATE, "name", "", context={"arguments": {"owner": "pallets"}}).result
    assert result["completion"]["values"] == ["flask", "jinja", "click"]
    assert seen == [("", {"owner": "pallets"})]


def test_2025_03_26_has_no_completion_context(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    seen: list[dict[str, str]] = []

    @mcp.completion(prompt="review", argument="framework")
    def frameworks(value: str, arguments: dict[str, str]) -> list[str]:
        seen.append(arguments)
        return []

    for version in ("2025-03-26", "2025-06-18"):
        complete(connect(make_client, app, version), PROMPT, "framework", "", context={"arguments": {"language": "py"}})
    assert seen == [{}, {"language": "py"}]


def test_a_completer_may_take_a_context(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.completion(prompt="review", argument="framework")
    def frameworks(prefix: str, ctx: Context) -> list[str]:
        return [f"{prefix}-{ctx.protocol_version}"]

    assert complete(make_client(app), PROMPT, "framework", "x").result["completion"]["values"] == ["x-2026-07-28"]


def test_at_most_100_values_are_sent_with_the_total_and_has_more(make_client: MakeClient, app: Flask,
                                                                  mcp: MCP) -> None:
    mcp.completion(resource="repo://{owner}/{name}", argument="owner")(lambda value: [f"o{n}" for n in range(250)])
    completion = complete(make_client(app), TEMPLATE, "owner", "").result["completion"]
    assert len(completion["values"]) == 100
    assert (completion["total"], completion["hasMore"]) == (250, True)


def test_a_completion_object_says_total_and_has_more_itself(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.completion(resource="repo://{owner}/{name}", argument="owner")(
        lambda value: Completion(["pallets"], total=7, has_more=True)
    )
    completion = complete(make_client(app), TEMPLATE, "owner", "p").result["completion"]
    assert completion == {"values": ["pallets"], "total": 7, "hasMore": True}


def test_an_argument_without_a_completer_gets_no_values(make_client: MakeClient, app: Flask) -> None:
    assert complete(make_client(app), TEMPLATE, "owner", "p").result["completion"] == {"values": []}


@pytest.mark.parametrize(
    "ref,argument",
    [
        ({"type": "ref/prompt", "name": "nope"}, "language"),
        ({"type": "ref/resource", "uri": "repo://{nope}"}, "nope"),
        (PROMPT, "not_an_argument"),
        (TEMPLATE, "not_a_variable"),
        ({"type": "ref/tool", "name": "x"}, "x"),
        ({"type": "ref/prompt"}, "language"),
    ],
)
def test_a_reference_to_nothing_we_serve_is_invalid_params(
    make_client: MakeClient, app: Flask, ref: dict[str, Any], argument: str
) -> None:
    for version in ("2026-07-28", "2025-11-25"):
        response = complete(connect(make_client, app, version), ref, argument, "")
        assert (response.status_code, response.error["code"]) == (200, -32602)


def test_a_malformed_argument_is_invalid_params(make_client: MakeClient, app: Flask) -> None:
    response = make_client(app).request("completion/complete", {"ref": PROMPT, "argument": {"name": "language"}})
    assert response.error["code"] == -32602


def test_a_failing_completer_is_an_internal_error(
    make_client: MakeClient, app: Flask, mcp: MCP, caplog: pytest.LogCaptureFixture
) -> None:
    @mcp.completion(prompt="review", argument="framework")
    def broken(value: str) -> list[str]:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        assert complete(make_client(app), PROMPT, "framework", "").error["code"] == -32603
    assert "boom" in caplog.text


def test_complete_for_an_unknown_argument_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(ValueError, match="'color'"):
        mcp.prompt(name="paint", complete={"color": ["red"]})(lambda colour: colour)
    assert "paint" not in mcp.prompts


def test_a_completer_with_an_unexpected_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="'extra'"):
        mcp.completion(prompt="review", argument="language")(lambda value, extra: [])


def test_completion_needs_exactly_one_target(mcp: MCP) -> None:
    with pytest.raises(TypeError):
        mcp.completion(argument="x")
    with pytest.raises(TypeError):
        mcp.completion(prompt="a", resource="b://c", argument="x")
