"""The Flask extension: set-up patterns, configuration, app context, instructions
and server info (design sections 1.2, 1.5, 6; spec digest 2.1, 2.2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, current_app, g

from flask_mcp import MCP, Context
from flask_mcp.config import DEFAULTS, ConfigError
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
SERVER_INFO = "io.modelcontextprotocol/serverInfo"
ICON = {"src": "https://example.com/logo.png", "mimeType": "image/png"}


def new_app(name: str = "ext", **config: Any) -> Flask:
    app = Flask(name)
    app.config.update(config)
    return app


def initialize(make_client: MakeClient, app: Flask, version: str = "2025-11-25", **kwargs: Any) -> dict[str, Any]:
    return make_client(app, version, **kwargs).initialize().result


def discover(make_client: MakeClient, app: Flask, **kwargs: Any) -> dict[str, Any]:
    return make_client(app, **kwargs).discover().result


# ---------------------------------------------------------------------- set-up patterns


def test_constructor_with_an_app_sets_it_up(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)
    state = app.extensions["mcp"]
    assert state.extension is mcp
    assert discover(make_client, app)["supportedVersions"][0] == "2026-07-28"


def test_init_app_later_sets_it_up(make_client: MakeClient) -> None:
    mcp = MCP()

    @mcp.tool
    def hello() -> str:
        return "hi"

    app = new_app()
    assert "mcp" not in app.extensions
    mcp.init_app(app)
    assert app.extensions["mcp"].extension is mcp
    client = make_client(app)
    assert client.call_tool("hello", {}).result["content"] == [{"type": "text", "text": "hi"}]


def test_app_extensions_holds_settings_and_server_state() -> None:
    app = new_app(MCP_PAGE_SIZE=7)
    MCP(app, name="stateful")
    state = app.extensions["mcp"]
    assert state.settings.page_size == 7
    assert state.settings.name == "stateful"
    assert state.server is not None
    assert state.sessions is not None


def test_init_app_twice_on_one_app_raises() -> None:
    app = new_app()
    mcp = MCP(app)
    with pytest.raises(RuntimeError):
        mcp.init_app(app)
    with pytest.raises(RuntimeError):
        MCP(app)


def test_one_extension_serves_two_apps_with_their_own_config(make_client: MakeClient) -> None:
    mcp = MCP()

    @mcp.tool
    def app_name() -> str:
        return current_app.name

    first, second = new_app("first", MCP_NAME="one"), new_app("second", MCP_NAME="two")
    mcp.init_app(first)
    mcp.init_app(second)
    assert initialize(make_client, first)["serverInfo"]["name"] == "one"
    assert initialize(make_client, second)["serverInfo"]["name"] == "two"
    assert make_client(first).call_tool("app_name", {}).result["content"][0]["text"] == "first"
    assert make_client(second).call_tool("app_name", {}).result["content"][0]["text"] == "second"


def test_sessions_of_one_app_are_unknown_to_another(make_client: MakeClient, tmp_path: Path) -> None:
    mcp = MCP()
    first, second = new_app("first"), new_app("second")
    # Each app keeps its sessions in its own instance folder (the SQLite default).
    first.instance_path, second.instance_path = str(tmp_path / "first"), str(tmp_path / "second")
    mcp.init_app(first)
    mcp.init_app(second)
    client = make_client(first, "2025-11-25")
    client.initialize()
    response = make_client(second, "2025-11-25").post(
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        headers={"Mcp-Session-Id": client.session_id or "", "MCP-Protocol-Version": "2025-11-25"},
    )
    assert response.status_code == 404


# ---------------------------------------------------------------------- configuration


def test_init_app_sets_every_config_key_default() -> None:
    app = new_app()
    assert not any(key in app.config for key in DEFAULTS)
    MCP(app)
    for key, default in DEFAULTS.items():
        assert key in app.config, key
        assert app.config[key] == default


def test_init_app_keeps_values_the_app_already_configured() -> None:
    app = new_app(MCP_PAGE_SIZE=3, MCP_CACHE_SCOPE="private", MCP_URL_PREFIX="/x")
    MCP(app)
    assert app.config["MCP_PAGE_SIZE"] == 3
    assert app.config["MCP_CACHE_SCOPE"] == "private"
    assert app.config["MCP_URL_PREFIX"] == "/x"


def test_defaults_name_the_server_after_the_app(make_client: MakeClient) -> None:
    app = new_app("my_flask_app")
    MCP(app)
    info = initialize(make_client, app)["serverInfo"]
    assert info["name"] == "my_flask_app"
    assert info["version"] == "0.0.0"


def test_config_beats_defaults(make_client: MakeClient) -> None:
    app = new_app(MCP_NAME="from-config", MCP_VERSION="4.5.6")
    MCP(app)
    info = initialize(make_client, app)["serverInfo"]
    assert (info["name"], info["version"]) == ("from-config", "4.5.6")


def test_constructor_arguments_beat_config(make_client: MakeClient) -> None:
    app = new_app(MCP_NAME="from-config", MCP_VERSION="4.5.6")
    MCP(app, name="from-ctor", version="7.8.9")
    info = initialize(make_client, app)["serverInfo"]
    assert (info["name"], info["version"]) == ("from-ctor", "7.8.9")
    meta_info = discover(make_client, app)["_meta"][SERVER_INFO]
    assert (meta_info["name"], meta_info["version"]) == ("from-ctor", "7.8.9")


def test_constructor_instructions_beat_config_instructions(make_client: MakeClient) -> None:
    app = new_app(MCP_INSTRUCTIONS="from config")
    MCP(app, instructions="from constructor")
    assert initialize(make_client, app)["instructions"] == "from constructor"


def test_cache_config_shows_in_2026_results(make_client: MakeClient) -> None:
    app = new_app(MCP_CACHE_TTL_MS=1234, MCP_CACHE_SCOPE="private")
    MCP(app)
    client = make_client(app)
    for result in (client.discover().result, client.list_tools().result):
        assert result["ttlMs"] == 1234
        assert result["cacheScope"] == "private"


@pytest.mark.parametrize(
    "key,value",
    [
        ("MCP_URL_PREFIX", "mcp"),
        ("MCP_URL_PREFIX", "/mcp/"),
        ("MCP_URL_PREFIX", ""),
        ("MCP_PAGE_SIZE", 0),
        ("MCP_PAGE_SIZE", -5),
        ("MCP_PAGE_SIZE", "10"),
        ("MCP_CACHE_SCOPE", "shared"),
        ("MCP_CACHE_TTL_MS", -1),
        ("MCP_BACKEND", "bogus://"),
        ("MCP_BACKEND", 42),
        ("MCP_SESSION_TIMEOUT", 0),
        ("MCP_MAX_CONTENT_LENGTH", "big"),
        ("MCP_ALLOWED_ORIGINS", 5),
        ("MCP_ALLOWED_HOSTS", [1, 2]),
        ("MCP_NAME", 123),
    ],
)
def test_bad_config_raises_at_init_app_naming_the_key(key: str, value: Any) -> None:
    app = new_app(**{key: value})
    mcp = MCP()
    with pytest.raises(ConfigError, match=key):
        mcp.init_app(app)


def test_config_error_is_a_value_error() -> None:
    assert issubclass(ConfigError, ValueError)


def test_failed_init_app_leaves_the_app_without_the_extension() -> None:
    app = new_app(MCP_PAGE_SIZE=0)
    with pytest.raises(ConfigError):
        MCP(app)
    assert "mcp" not in app.extensions
    assert "mcp" not in app.blueprints


def test_allowed_origins_may_be_a_comma_separated_string() -> None:
    app = new_app(MCP_ALLOWED_ORIGINS="https://a.example, https://b.example")
    MCP(app)
    assert app.extensions["mcp"].settings.allowed_origins == ("https://a.example", "https://b.example")


def test_custom_url_prefix_moves_the_endpoints(make_client: MakeClient) -> None:
    app = new_app(MCP_URL_PREFIX="/api/v1/mcp")
    MCP(app)
    client = make_client(app, url="/api/v1/mcp")
    assert client.discover().status_code == 200
    http = app.test_client()
    assert http.get("/api/v1/mcp/health").status_code == 200
    assert http.get("/mcp/health").status_code == 404
    moved = http.post("/mcp", data="{}", content_type="application/json")
    assert moved.status_code == 404


# ---------------------------------------------------------------------- app context


def test_tools_run_inside_the_app_context(make_client: MakeClient) -> None:
    app = new_app(GREETING="Howdy")
    mcp = MCP(app)

    @mcp.tool
    def greet(name: str) -> str:
        g.greeted = name
        return f"{current_app.config['GREETING']}, {g.greeted}!"

    for version in ("2026-07-28", *LEGACY):
        client = make_client(app, version)
        if version != "2026-07-28":
            client.initialize()
        assert client.call_tool("greet", {"name": "Ann"}).result["content"][0]["text"] == "Howdy, Ann!"


def test_tools_see_the_apps_own_extensions(make_client: MakeClient) -> None:
    app = new_app()
    app.extensions["inventory"] = {"apples": 3}
    mcp = MCP(app)

    @mcp.tool
    def count(item: str) -> int:
        return current_app.extensions["inventory"][item]  # type: ignore[no-any-return]

    assert make_client(app).call_tool("count", {"item": "apples"}).result["structuredContent"] == {"result": 3}


# ---------------------------------------------------------------------- instructions


def test_static_instructions_show_in_initialize_and_discover(make_client: MakeClient) -> None:
    app = new_app()
    MCP(app, instructions="Use echo to test.")
    for version in LEGACY:
        assert initialize(make_client, app, version)["instructions"] == "Use echo to test."
    assert discover(make_client, app)["instructions"] == "Use echo to test."


def test_config_instructions_show_in_initialize_and_discover(make_client: MakeClient) -> None:
    app = new_app(MCP_INSTRUCTIONS="From config.")
    MCP(app)
    assert initialize(make_client, app)["instructions"] == "From config."
    assert discover(make_client, app)["instructions"] == "From config."


def test_no_instructions_means_no_field(make_client: MakeClient) -> None:
    app = new_app()
    MCP(app)
    assert "instructions" not in initialize(make_client, app)
    assert "instructions" not in discover(make_client, app)


def test_instructions_function_with_context_is_computed_per_request(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app, instructions="static text that the function replaces")

    @mcp.instructions
    def explain(ctx: Context) -> str:
        return f"{ctx.method} via {ctx.protocol_version} for {ctx.client_info.get('name')}"

    client_info = {"name": "inspector", "version": "1"}
    assert initialize(make_client, app, "2025-06-18", client_info=client_info)["instructions"] == (
        "initialize via 2025-06-18 for inspector"
    )
    assert discover(make_client, app, client_info=client_info)["instructions"] == (
        "server/discover via 2026-07-28 for inspector"
    )


def test_instructions_function_without_parameters_is_called(make_client: MakeClient) -> None:
    app = new_app(GREETING="Be kind.")
    mcp = MCP(app)
    calls: list[int] = []

    @mcp.instructions
    def explain() -> str:
        calls.append(1)
        return current_app.config["GREETING"]  # type: ignore[no-any-return]

    assert initialize(make_client, app)["instructions"] == "Be kind."
    assert discover(make_client, app)["instructions"] == "Be kind."
    assert len(calls) == 2


def test_instructions_decorator_returns_the_function_unchanged() -> None:
    mcp = MCP()

    def explain() -> str:
        return "x"

    assert mcp.instructions(explain) is explain
    assert explain() == "x"


def test_instructions_function_returning_none_omits_the_field(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app, instructions="fallback that must not be used")

    @mcp.instructions
    def nothing(ctx: Context) -> str | None:
        return None

    assert "instructions" not in initialize(make_client, app)
    assert "instructions" not in discover(make_client, app)


def test_instructions_can_depend_on_declared_capabilities(make_client: MakeClient) -> None:
    app = new_app()
    mcp = MCP(app)

    @mcp.instructions
    def explain(ctx: Context) -> str | None:
        return "You may sample." if ctx.has_client_capability("sampling") else None

    assert discover(make_client, app, capabilities={"sampling": {}})["instructions"] == "You may sample."
    assert "instructions" not in discover(make_client, app)


# ---------------------------------------------------------------------- server info per revision


@pytest.fixture
def described_app() -> Flask:
    app = new_app()
    MCP(
        app,
        name="described",
        version="1.0.0",
        title="Described Server",
        description="A server with every info field.",
        website_url="https://example.com/described",
        icons=[ICON],
    )
    return app


def test_server_info_on_2025_03_26_has_only_name_and_version(make_client: MakeClient, described_app: Flask) -> None:
    info = initialize(make_client, described_app, "2025-03-26")["serverInfo"]
    assert info == {"name": "described", "version": "1.0.0"}


def test_server_info_on_2025_06_18_adds_the_title(make_client: MakeClient, described_app: Flask) -> None:
    info = initialize(make_client, described_app, "2025-06-18")["serverInfo"]
    assert info == {"name": "described", "version": "1.0.0", "title": "Described Server"}


def test_server_info_on_2025_11_25_has_every_field(make_client: MakeClient, described_app: Flask) -> None:
    info = initialize(make_client, described_app, "2025-11-25")["serverInfo"]
    assert info == {
        "name": "described",
        "version": "1.0.0",
        "title": "Described Server",
        "description": "A server with every info field.",
        "websiteUrl": "https://example.com/described",
        "icons": [ICON],
    }


def test_server_info_in_2026_meta_has_every_field(make_client: MakeClient, described_app: Flask) -> None:
    info = discover(make_client, described_app)["_meta"][SERVER_INFO]
    assert info["title"] == "Described Server"
    assert info["description"] == "A server with every info field."
    assert info["websiteUrl"] == "https://example.com/described"
    assert info["icons"] == [ICON]


def test_unset_server_info_fields_are_omitted(make_client: MakeClient) -> None:
    app = new_app()
    MCP(app, name="plain", version="1")
    info = initialize(make_client, app, "2025-11-25")["serverInfo"]
    assert info == {"name": "plain", "version": "1"}


def test_a_session_store_object_can_be_handed_in_as_backend(make_client: MakeClient) -> None:
    from flask_mcp.backends import MemorySessionStore

    store = MemorySessionStore()
    app = new_app(MCP_BACKEND=store)
    MCP(app)
    assert app.extensions["mcp"].sessions is store
    client = make_client(app, "2025-11-25")
    client.initialize()
    assert len(store) == 1
    assert store.get(client.session_id or "") is not None
    client.delete()
    assert len(store) == 0
