"""MCP Apps (extension io.modelcontextprotocol/ui): views as ui:// resources
with _meta.ui, tools linked to them, the capability, and the sandbox domain
derived from the URL each request reached the server at (spec digest section 7)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix

from flask_mcp import CSP, MCP, sandbox_domain
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
UI = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"
HTML = "<!doctype html><html><body><p>view</p></body></html>"


@pytest.fixture
def mcp() -> MCP:
    return MCP(name="apps-server", version="0.1.0")


@pytest.fixture
def app(app: Flask, mcp: MCP) -> Flask:
    """The root conftest's app, serving this module's ``mcp``."""
    app.config["MCP_BACKEND"] = "memory://"
    mcp.init_app(app)
    return app


def view_meta(client: MCPTestClient, uri: str = "ui://apps/view") -> tuple[dict[str, Any], dict[str, Any]]:
    """``_meta.ui`` of the listing entry and of the contents item."""
    [entry] = [r for r in client.request("resources/list").result["resources"] if r["uri"] == uri]
    [item] = client.request("resources/read", {"uri": uri}).result["contents"]
    return entry["_meta"]["ui"], item["_meta"]["ui"]


def test_the_sandbox_domain_is_claudes_hash_of_the_exact_url() -> None:
    assert sandbox_domain("https://example.com/mcp") == "c3d80a4ed901ee05b21755a88273b4a4.claudemcpcontent.com"
    assert sandbox_domain("https://example.com/mcp/") != sandbox_domain("https://example.com/mcp")


@pytest.mark.parametrize("version", ALL)
def test_a_view_is_an_mcp_app_html_resource(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    @mcp.ui_resource("ui://apps/view", title="View", prefers_border=True)
    def view() -> str:
        """A view."""
        return HTML

    client = connect(make_client, app, version)
    [entry] = client.request("resources/list").result["resources"]
    assert entry["mimeType"] == MIME
    [item] = client.request("resources/read", {"uri": "ui://apps/view"}).result["contents"]
    assert (item["uri"], item["mimeType"], item["text"]) == ("ui://apps/view", MIME, HTML)
    if version == "2025-03-26":  # no _meta on resources or contents yet
        assert "_meta" not in entry and "_meta" not in item
    else:
        assert entry["_meta"]["ui"]["prefersBorder"] is True
        assert item["_meta"]["ui"] == entry["_meta"]["ui"]


def test_csp_and_permissions_are_on_the_listing_and_the_contents(make_client: MakeClient, app: Flask,
                                                                  mcp: MCP) -> None:
    @mcp.ui_resource(
        "ui://apps/view",
        csp={"connectDomains": ["https://api.example.com"], "resource_domains": ["https://cdn.example.com"]},
        permissions=["clipboardWrite", "camera"],
        domain=None,
    )
    def view() -> str:
        return HTML

    listed, read = view_meta(make_client(app))
    expected = {
        "csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]},
        "permissions": {"clipboardWrite": {}, "camera": {}},
    }
    assert listed == read == expected


def test_the_auto_domain_follows_the_url_the_client_used(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.ui_resource("ui://apps/view")(lambda: HTML)
    local = view_meta(make_client(app))
    assert local[0]["domain"] == local[1]["domain"] == sandbox_domain("http://localhost/mcp")
    public = view_meta(make_client(app, url="https://example.com/mcp"))
    assert public[0]["domain"] == "c3d80a4ed901ee05b21755a88273b4a4.claudemcpcontent.com"


def test_behind_a_proxy_the_auto_domain_uses_the_forwarded_url(make_client: MakeClient, app: Flask,
                                                                mcp: MCP) -> None:
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1, x_host=1)  # type: ignore[method-assign]
    mcp.ui_resource("ui://apps/view")(lambda: HTML)
    client = make_client(app, headers={"X-Forwarded-Proto": "https", "X-Forwarded-Host": "example.com"})
    assert view_meta(client)[1]["domain"] == "c3d80a4ed901ee05b21755a88273b4a4.claudemcpcontent.com"


def test_a_fixed_or_computed_domain_replaces_the_auto_one(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.ui_resource("ui://apps/fixed", domain="views.example.com")(lambda: HTML)
    mcp.ui_resource("ui://apps/computed", domain=lambda url: url.split("//")[1].split("/")[0] + ".views")(lambda: HTML)
    mcp.ui_resource("ui://apps/none", domain=None)(lambda: HTML)
    client = make_client(app)
    assert view_meta(client, "ui://apps/fixed")[1]["domain"] == "views.example.com"
    assert view_meta(client, "ui://apps/computed")[1]["domain"] == "localhost.views"
    [item] = client.request("resources/read", {"uri": "ui://apps/none"}).result["contents"]
    assert "_meta" not in item  # nothing to say: the host decides


def test_what_the_contents_set_themselves_wins(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    from flask_mcp import ResourceContents

    mcp.ui_resource("ui://apps/view", prefers_border=True, domain=None)(
        lambda: ResourceContents(text=HTML, meta={"ui": {"prefersBorder": False}, "other": 1})
    )
    listed, read = view_meta(make_client(app))
    assert listed == {"prefersBorder": True}
    assert read == {"prefersBorder": False}


@pytest.mark.parametrize("version", ALL)
def test_the_extension_is_declared_once_a_view_exists(make_client: MakeClient, app: Flask, mcp: MCP,
                                                       version: str) -> None:
    client = connect(make_client, app, version)
    capabilities = client.discover().result if version == "2026-07-28" else client.initialize().result
    assert "extensions" not in capabilities["capabilities"]
    mcp.ui_resource("ui://apps/view")(lambda: HTML)
    capabilities = client.discover().result if version == "2026-07-28" else client.initialize().result
    assert capabilities["capabilities"]["extensions"] == {UI: {"mimeTypes": [MIME]}}


@pytest.mark.parametrize("version", ALL)
def test_a_tool_names_its_view_in_meta_ui(make_client: MakeClient, app: Flask, mcp: MCP, version: str) -> None:
    @mcp.tool(ui="ui://apps/view", visibility=["app"], meta={"other": 1})
    def refresh() -> str:
        """Refreshes the view."""
        return "fresh"

    [tool] = connect(make_client, app, version).list_tools().result["tools"]
    if version == "2025-03-26":  # tools have no _meta yet
        assert "_meta" not in tool
    else:
        assert tool["_meta"] == {
            "other": 1,
            "ui": {"resourceUri": "ui://apps/view", "visibility": ["app"]},
            "ui/resourceUri": "ui://apps/view",  # the deprecated flat key older hosts read
        }


def test_a_tool_without_visibility_leaves_it_to_the_default(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    mcp.tool(name="x", ui="ui://apps/view")(lambda: "x")
    [tool] = make_client(app).list_tools().result["tools"]
    assert tool["_meta"]["ui"] == {"resourceUri": "ui://apps/view"}


@pytest.mark.parametrize(
    "register",
    [
        lambda mcp: mcp.ui_resource("app://not-ui")(lambda: HTML),
        lambda mcp: mcp.ui_resource("ui://x", permissions=["teleport"])(lambda: HTML),
        lambda mcp: mcp.ui_resource("ui://x", csp={"scriptDomains": ["https://a"]})(lambda: HTML),
        lambda mcp: mcp.ui_resource("ui://x", csp={"connectDomains": "https://a"})(lambda: HTML),
        lambda mcp: mcp.ui_resource("ui://x", domain=42)(lambda: HTML),
        lambda mcp: mcp.tool(name="t", ui="https://example.com/view")(lambda: ""),
        lambda mcp: mcp.tool(name="t", ui="ui://x", visibility=["everyone"])(lambda: ""),
        lambda mcp: mcp.tool(name="t", ui="ui://x", visibility=[])(lambda: ""),
        lambda mcp: mcp.tool(name="t", visibility=["app"])(lambda: ""),
    ],
)
def test_bad_apps_options_raise_at_decoration(mcp: MCP, register: Callable[[MCP], Any]) -> None:
    with pytest.raises(ValueError):
        register(mcp)
    assert len(mcp.tools) == 0 and len(mcp.resources) == 0


def test_a_csp_object_gives_the_same_wire_form_as_a_dict() -> None:
    assert CSP(connect_domains=["https://a"], frame_domains=["https://b"]).to_wire() == {
        "connectDomains": ["https://a"], "frameDomains": ["https://b"],
    }
    assert CSP.coerce({"baseUriDomains": ["https://c"]}) == CSP(base_uri_domains=("https://c",))
