"""Reading resources: text, blobs, JSON and several contents, templates with
typed variables, the not-found error of each revision, and reads that ask the
client for input (spec digest sections 5.4 and 5.13)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask

from flask_mcp import MCP, Context, EmbeddedResource, ResourceContents
from flask_mcp.errors import ResourceNotFound
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
LEGACY = ALL[1:]
PNG = b"\x89PNG\r\n\x1a\n fake image bytes"
NAME = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


@pytest.fixture
def mcp() -> MCP:
    return MCP(name="resources-server", version="0.1.0")


@pytest.fixture
def app(app: Flask, mcp: MCP) -> Flask:
    """The root conftest's app, serving this module's ``mcp``."""
    app.config["SECRET_KEY"] = "test-secret"
    app.config["MCP_BACKEND"] = "memory://"
    mcp.init_app(app)
    return app


def read(client: MCPTestClient, uri: str) -> Any:
    return client.request("resources/read", {"uri": uri})


def contents(client: MCPTestClient, uri: str) -> list[dict[str, Any]]:
    return read(client, uri).result["contents"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- reading


@pytest.mark.parametrize("version", ALL)
def test_a_string_is_read_as_text(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    mcp.resource("file:///notes.txt")(lambda: "hello")
    client = connect(make_client, app, version)
    assert contents(client, "file:///notes.txt") == [{"uri": "file:///notes.txt", "mimeType": "text/plain",
                                                      "text": "hello"}]


def test_bytes_are_read_as_a_base64_blob(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://logo", mime_type="image/png")(lambda: PNG)
    [item] = contents(make_client(app), "app://logo")
    assert item["mimeType"] == "image/png"
    assert base64.b64decode(item["blob"]) == PNG
    assert "text" not in item


def test_bytes_without_a_mime_type_are_octet_stream(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://raw")(lambda: b"\x00\x01")
    assert contents(make_client(app), "app://raw")[0]["mimeType"] == "application/octet-stream"


def test_other_values_are_read_as_json(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://config")(lambda: {"debug": False, "tags": ["a", "b"]})
    [item] = contents(make_client(app), "app://config")
    assert item["mimeType"] == "application/json"
    assert json.loads(item["text"]) == {"debug": False, "tags": ["a", "b"]}


def test_several_contents_helpers_become_several_items(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.resource("app://dir")
    def directory() -> list[Any]:
        return [
            ResourceContents(text="a", uri="app://dir/a.txt", mime_type="text/plain", meta={"k": 1}),
            ResourceContents(blob=b"b", uri="app://dir/b.bin"),
            EmbeddedResource("app://dir/c.md", text="# c", mime_type="text/markdown"),
        ]

    assert contents(make_client(app), "app://dir") == [
        {"uri": "app://dir/a.txt", "mimeType": "text/plain", "text": "a", "_meta": {"k": 1}},
        {"uri": "app://dir/b.bin", "blob": base64.b64encode(b"b").decode()},
        {"uri": "app://dir/c.md", "mimeType": "text/markdown", "text": "# c"},
    ]


def test_contents_meta_is_dropped_for_2025_03_26(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://m")(lambda: ResourceContents(text="x", meta={"k": 1}))
    assert contents(connect(make_client, app, "2025-03-26"), "app://m") == [{"uri": "app://m", "text": "x"}]


def test_a_resource_function_gets_its_context(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.resource("app://whoami")
    def whoami(ctx: Context) -> str:
        return f"{ctx.method} over {ctx.protocol_version}"

    assert contents(make_client(app), "app://whoami")[0]["text"] == "resources/read over 2026-07-28"


def test_template_variables_are_coerced_to_the_parameter_types(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.resource("app://items/{id}/{flag}")
    def item(id: int, flag: bool) -> dict[str, Any]:
        return {"id": id, "next": id + 1, "flag": flag}

    [entry] = contents(make_client(app), "app://items/41/true")
    assert entry["uri"] == "app://items/41/true"
    assert json.loads(entry["text"]) == {"id": 41, "next": 42, "flag": True}


def test_a_uri_that_fits_no_template_type_tries_the_next_template(make_client: MakeClient, app: Flask,
                                                                   mcp: MCP) -> None:
    mcp.resource("app://users/{id}")(lambda id: f"user number {id}")
    mcp.add_resource(lambda name: f"user called {name}", "app://users/{name}")

    # lambdas carry no annotations: both accept anything, so the first registered wins
    client = make_client(app)
    assert contents(client, "app://users/ada")[0]["text"] == "user number ada"

    @mcp.resource("app://orders/{id}")
    def order(id: int) -> str:
        return f"order {id}"

    @mcp.resource("app://orders/{slug}")
    def order_by_slug(slug: str) -> str:
        return f"order slug {slug}"

    assert contents(client, "app://orders/7")[0]["text"] == "order 7"
    assert contents(client, "app://orders/latest")[0]["text"] == "order slug latest"


def test_reserved_and_path_expansions_capture_slashes(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.resource("file:///{+path}")
    def file(path: str) -> str:
        return path

    @mcp.resource("repo://{owner}{/parts*}{?ref}")
    def repo(owner: str, parts: list[str] | None = None, ref: str = "main") -> str:
        return f"{owner}:{'/'.join(parts or [])}@{ref}"

    client = make_client(app)
    assert contents(client, "file:///etc/hosts")[0]["text"] == "etc/hosts"
    assert contents(client, "repo://ada/src/app.py?ref=dev")[0]["text"] == "ada:src/app.py@dev"
    assert contents(client, "repo://ada")[0]["text"] == "ada:@main"


def test_a_fixed_resource_wins_over_a_template(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://items/{id}")(lambda id: f"item {id}")
    mcp.resource("app://items/special")(lambda: "special")
    assert contents(make_client(app), "app://items/special")[0]["text"] == "special"


# ---------------------------------------------------------------------- errors


@pytest.mark.parametrize("version,code", [("2026-07-28", -32602)] + [(v, -32002) for v in LEGACY])
def test_an_unknown_uri_is_the_revisions_not_found_error_with_the_uri(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str, code: int
) -> None:
    mcp.resource("app://x")(lambda: "x")
    response = read(connect(make_client, app, version), "app://missing")
    assert response.status_code == 200
    assert response.error["code"] == code
    assert response.error["data"] == {"uri": "app://missing"}


def test_none_is_not_found_never_an_empty_contents_list(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://items/{id}")(lambda id: None)
    response = read(make_client(app), "app://items/9")
    assert response.error["code"] == -32602
    assert response.error["data"] == {"uri": "app://items/9"}


def test_an_empty_list_is_an_empty_json_array(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://items")(lambda: [])
    assert contents(make_client(app), "app://items")[0]["text"] == "[]"


@pytest.mark.parametrize("version,code", [("2026-07-28", -32602), ("2025-11-25", -32002)])
def test_raising_resource_not_found_gives_the_revisions_code(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str, code: int
) -> None:
    @mcp.resource("app://items/{id}")
    def item(id: str) -> str:
        raise ResourceNotFound(f"no item {id}")

    response = read(connect(make_client, app, version), "app://items/3")
    assert (response.error["code"], response.error["data"]) == (code, {"uri": "app://items/3"})


def test_a_failing_resource_is_an_internal_error_without_internals(
    make_client: MakeClient, app: Flask, mcp: MCP, caplog: pytest.LogCaptureFixture
) -> None:
    @mcp.resource("app://broken")
    def broken() -> str:
        raise RuntimeError("db-password-hunter2")

    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        response = read(make_client(app), "app://broken")
    assert response.error["code"] == -32603
    assert "hunter2" not in json.dumps(response.message)
    assert "hunter2" in caplog.text


@pytest.mark.parametrize("params", [{}, {"uri": 7}, {"uri": ""}])
def test_a_read_without_a_uri_is_invalid_params(make_client: MakeClient, app: Flask, mcp: MCP,
                                                 params: dict[str, Any]) -> None:
    mcp.resource("app://x")(lambda: "x")
    client = connect(make_client, app, "2025-11-25")
    assert client.request("resources/read", params).error["code"] == -32602


def test_a_2026_read_needs_mcp_name_to_repeat_the_uri(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://x")(lambda: "x")
    response = make_client(app).request("resources/read", {"uri": "app://x"}, headers={"Mcp-Name": "app://y"})
    assert (response.status_code, response.error["code"]) == (400, -32020)


# ---------------------------------------------------------------------- multi round-trip


def test_a_resource_can_ask_the_client_and_then_be_read(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.resource("app://greeting")
    def greeting(ctx: Context) -> str:
        answer = ctx.elicit("Who is reading?", NAME, key="who")
        return f"Hello, {(answer.content or {}).get('name')}"

    client = make_client(app, capabilities={"elicitation": {}})
    first = read(client, "app://greeting").result
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["who"]["method"] == "elicitation/create"
    assert "ttlMs" not in first and "cacheScope" not in first
    second = client.request("resources/read", {
        "uri": "app://greeting", "requestState": first["requestState"],
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Ada"}}},
    }).result
    assert second["contents"][0]["text"] == "Hello, Ada"
    assert (second["ttlMs"], second["cacheScope"]) == (0, "private")  # an answer is never cached


def test_a_request_state_is_bound_to_the_uri_it_was_issued_for(make_client: MakeClient, app: Flask,
                                                                 mcp: MCP) -> None:
    @mcp.resource("app://ask/{n}")
    def ask(n: str, ctx: Context) -> str:
        return ctx.elicit("Name?", NAME, key="who").action

    client = make_client(app, capabilities={"elicitation": {}})
    state = read(client, "app://ask/1").result["requestState"]
    response = client.request("resources/read", {
        "uri": "app://ask/2", "requestState": state,
        "inputResponses": {"who": {"action": "accept", "content": {"name": "Eve"}}},
    })
    assert response.error["code"] == -32602
