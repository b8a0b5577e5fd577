"""Resources: registration, the capability, listing per revision and
pagination, legacy subscriptions and caching hints (spec digest sections 5.1,
5.2 and 5.4). Reading is in test_resources_read.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask

from flask_mcp import MCP
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
LEGACY = ALL[1:]
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png"}


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


# ---------------------------------------------------------------------- registration


def test_decorator_returns_the_function_unchanged(mcp: MCP) -> None:
    def notes() -> str:
        return "n"

    assert mcp.resource("file:///notes.txt")(notes) is notes
    assert notes() == "n"
    assert "file:///notes.txt" in mcp.resources


@pytest.mark.parametrize("uri", ["notes.txt", "", "/abs/path", "{id}"])
def test_a_uri_without_a_scheme_raises_at_decoration(mcp: MCP, uri: str) -> None:
    with pytest.raises(ValueError, match="scheme"):
        mcp.resource(uri)(lambda: "x")


def test_a_fixed_uri_with_parameters_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="template"):

        @mcp.resource("app://items")
        def items(id: int) -> str:
            return str(id)


def test_a_template_variable_without_a_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="'id'"):

        @mcp.resource("app://items/{id}")
        def item() -> str:
            return ""


def test_a_parameter_that_is_not_a_template_variable_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="'extra'"):

        @mcp.resource("app://items/{id}")
        def item(id: int, extra: str = "") -> str:
            return ""


def test_a_required_parameter_for_an_optional_query_variable_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(TypeError, match="defaults"):

        @mcp.resource("app://items{?page}")
        def items(page: int) -> str:
            return ""


@pytest.mark.parametrize("options", [{"ttl_ms": -1}, {"ttl_ms": 1.5}, {"cache_scope": "shared"}])
def test_bad_caching_hints_raise_at_decoration(mcp: MCP, options: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        mcp.resource("app://x", **options)(lambda: "x")


def test_a_duplicate_uri_raises_and_leaves_the_first(mcp: MCP) -> None:
    mcp.resource("app://x")(lambda: "first")
    with pytest.raises(ValueError, match="app://x"):
        mcp.resource("app://x")(lambda: "second")
    assert len(mcp.resources) == 1


def test_resources_can_be_added_and_removed_at_run_time(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    heard: list[str] = []
    mcp.resources.on_list_changed.append(heard.append)
    generation = mcp.resources.generation
    mcp.add_resource(lambda: "late", "app://late", name="late")
    client = make_client(app)
    assert [r["uri"] for r in client.request("resources/list").result["resources"]] == ["app://late"]
    mcp.remove_resource("app://late")
    assert mcp.resources.generation == generation + 2
    assert heard == ["resources", "resources"]
    with pytest.raises(KeyError):
        mcp.remove_resource("app://late")


# ---------------------------------------------------------------------- capability and listing


def test_without_resources_the_capability_is_absent_and_the_methods_are_not_found(
    make_client: MakeClient, app: Flask
) -> None:
    modern = make_client(app)
    assert "resources" not in modern.discover().result["capabilities"]
    response = modern.request("resources/list")
    assert (response.status_code, response.error["code"]) == (404, -32601)
    legacy = connect(make_client, app, "2025-11-25")
    assert "resources" not in legacy.initialize().result["capabilities"]
    response = legacy.request("resources/read", {"uri": "app://x"})
    assert (response.status_code, response.error["code"]) == (200, -32601)


def test_legacy_sessions_are_offered_neither_subscriptions_nor_list_changes(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    mcp.resource("app://x")(lambda: "x")
    for version in LEGACY:
        assert connect(make_client, app, version).initialize().result["capabilities"]["resources"] == {}


def test_2026_clients_are_offered_updates_where_a_bus_delivers_them(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    mcp.resource("app://x")(lambda: "x")
    capability = make_client(app).discover().result["capabilities"]["resources"]
    assert capability == {"subscribe": True, "listChanged": True}


def test_without_a_message_bus_no_updates_are_offered(make_client: MakeClient) -> None:
    from cachelib import SimpleCache

    app = Flask(__name__)
    app.config["MCP_BACKEND"] = SimpleCache()
    mcp = MCP(app)
    mcp.resource("app://x")(lambda: "x")
    assert make_client(app).discover().result["capabilities"]["resources"] == {}


@pytest.mark.parametrize("version", ALL)
def test_a_listing_carries_what_each_revision_defines(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str
) -> None:
    @mcp.resource("file:///notes.txt", title="Notes", size=12, icons=[ICON], meta={"k": "v"},
                  annotations={"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"})
    def notes() -> str:
        """My notes."""
        return "twelve bytes"

    client = connect(make_client, app, version)
    [entry] = client.request("resources/list").result["resources"]
    expected = {"uri": "file:///notes.txt", "name": "notes", "description": "My notes.", "mimeType": "text/plain",
                "size": 12, "annotations": {"audience": ["user"]}}
    if version != "2025-03-26":
        expected |= {"title": "Notes", "_meta": {"k": "v"}}
        expected["annotations"] = {"audience": ["user"], "lastModified": "2025-01-01T00:00:00Z"}
    if version in ("2025-11-25", "2026-07-28"):
        expected["icons"] = [ICON]
    assert entry == expected


@pytest.mark.parametrize("version", ALL)
def test_templates_are_listed_apart_from_resources(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    @mcp.resource("app://items/{id}", name="item", mime_type="application/json")
    def item(id: int) -> dict[str, int]:
        return {"id": id}

    client = connect(make_client, app, version)
    assert client.request("resources/list").result["resources"] == []
    templates = client.request("resources/templates/list").result["resourceTemplates"]
    assert templates == [{"uriTemplate": "app://items/{id}", "name": "item", "mimeType": "application/json"}]


def test_listings_are_paginated_with_opaque_cursors(make_client: MakeClient, mcp: MCP) -> None:
    app = Flask(__name__)
    app.config["MCP_PAGE_SIZE"] = 2
    mcp.init_app(app)
    for n in range(5):
        mcp.add_resource(lambda: "x", f"app://r{n}")
    client = make_client(app)
    seen: list[str] = []
    cursor = None
    while True:
        result = client.request("resources/list", {"cursor": cursor} if cursor else {}).result
        seen += [r["uri"] for r in result["resources"]]
        cursor = result.get("nextCursor")
        if cursor is None:
            break
    assert seen == [f"app://r{n}" for n in range(5)]
    assert client.request("resources/list", {"cursor": "not-ours"}).error["code"] == -32602


# ---------------------------------------------------------------------- legacy subscriptions


@pytest.mark.parametrize("version", LEGACY)
@pytest.mark.parametrize("method", ["resources/subscribe", "resources/unsubscribe"])
def test_legacy_subscribe_and_unsubscribe_are_acknowledged(
    make_client: MakeClient, app: Flask, mcp: MCP, version: str, method: str
) -> None:
    mcp.resource("app://watched")(lambda: "x")
    client = connect(make_client, app, version)
    assert client.request(method, {"uri": "app://watched"}).result == {}
    assert client.request(method, {"uri": "app://nothing"}).error["code"] == -32002
    assert client.request(method, {}).error["code"] == -32602


def test_subscribe_is_not_a_2026_method(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://watched")(lambda: "x")
    response = make_client(app).request("resources/subscribe", {"uri": "app://watched"})
    assert (response.status_code, response.error["code"]) == (404, -32601)


# ---------------------------------------------------------------------- caching hints


def test_2026_lists_and_reads_carry_the_configured_caching_hints(make_client: MakeClient, mcp: MCP) -> None:
    app = Flask(__name__)
    app.config.update(MCP_CACHE_TTL_MS=5000, MCP_CACHE_SCOPE="private")
    mcp.init_app(app)
    mcp.resource("app://x")(lambda: "x")
    client = make_client(app)
    for method, params in (("resources/list", {}), ("resources/templates/list", {}),
                           ("resources/read", {"uri": "app://x"})):
        result = client.request(method, params).result
        assert (result["ttlMs"], result["cacheScope"]) == (5000, "private"), method


def test_a_resource_sets_its_own_caching_hints(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.resource("app://clock", ttl_ms=0, cache_scope="private")(lambda: "now")
    mcp.resource("app://logo", ttl_ms=86_400_000)(lambda: "logo")
    client = make_client(app)
    clock = read(client, "app://clock").result
    assert (clock["ttlMs"], clock["cacheScope"]) == (0, "private")
    logo = read(client, "app://logo").result
    assert (logo["ttlMs"], logo["cacheScope"]) == (86_400_000, "public")


@pytest.mark.parametrize("version", LEGACY)
def test_legacy_results_carry_no_caching_hints(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    mcp.resource("app://x")(lambda: "x")
    client = connect(make_client, app, version)
    for result in (client.request("resources/list").result, read(client, "app://x").result):
        assert "ttlMs" not in result and "cacheScope" not in result




def test_the_revision_table_drops_subscribe_and_unsubscribe_in_2026() -> None:
    from flask_mcp.protocol.versions import REVISIONS

    served = {"resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get",
              "completion/complete"}
    subscriptions = {"resources/subscribe", "resources/unsubscribe"}
    for version in LEGACY:
        assert served | subscriptions <= REVISIONS[version].core_methods
    assert served <= REVISIONS["2026-07-28"].core_methods
    assert not subscriptions & REVISIONS["2026-07-28"].core_methods
