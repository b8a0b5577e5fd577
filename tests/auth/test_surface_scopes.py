"""Scopes on resources, resource templates and prompts, exactly as on tools:
checked at decoration, required to read, get or complete (403
insufficient_scope), and the lists filtered per caller with
``cacheScope: "private"`` for authenticated callers.

The verifier is a plain function over a table of principals (the app's own
code path), as in test_auth.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS
from flask import Flask

from flask_mcp import MCP
from flask_mcp.auth import Principal
from flask_mcp.testing import MCPResponse, MCPTestClient

MakeClient = Callable[..., MCPTestClient]

RESOURCE = "http://localhost/mcp"
METADATA = "http://localhost/.well-known/oauth-protected-resource/mcp"

TOKENS = {
    "plain-token": Principal(subject="plain", scopes=frozenset(), audience=(RESOURCE,)),
    "payroll-token": Principal(subject="clerk", scopes=frozenset({"payroll:read"}), audience=(RESOURCE,)),
    "boss-token": Principal(subject="boss", scopes=frozenset({"payroll", "crm", "billing"}), audience=(RESOURCE,)),
}

PAYROLL = "file:///payroll.csv"
CUSTOMERS = "app://customers/{id}"
REFUND = {"type": "ref/prompt", "name": "refund_letter"}
CUSTOMER_REF = {"type": "ref/resource", "uri": CUSTOMERS}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def build_mcp(ran: list[str]) -> MCP:
    """A server whose guarded functions record that they ran (they must not, on a 403)."""
    mcp = MCP(name="scoped-surface", version="1.0")

    @mcp.resource("file:///public.txt")
    def public() -> str:
        return "hello"

    @mcp.resource(PAYROLL, scopes=["payroll:read"])
    def payroll() -> str:
        ran.append("payroll")
        return "name,salary"

    @mcp.resource("app://docs/{slug}")
    def doc(slug: str) -> str:
        return f"doc {slug}"

    @mcp.resource(CUSTOMERS, scopes=["crm"], complete={"id": ["1001", "1002"]})
    def customer(id: int) -> dict[str, Any]:
        ran.append("customer")
        return {"id": id}

    @mcp.prompt
    def greet(name: str) -> str:
        return f"Say hello to {name}."

    @mcp.prompt(scopes=["billing:write"], complete={"tone": ["formal", "friendly"]})
    def refund_letter(customer: str, tone: str = "formal") -> str:
        ran.append("refund_letter")
        return f"Write a {tone} refund letter to {customer}."

    return mcp


def build_app(ran: list[str] | None = None, **config: Any) -> Flask:
    app = Flask("scoped-surface")
    app.config.update({"MCP_AUTH": True, "MCP_AUTH_SERVERS": ["https://auth.example.com"],
                       "MCP_BACKEND": "memory://", **config})
    mcp = build_mcp(ran if ran is not None else [])
    mcp.token_verifier(TOKENS.get)
    mcp.init_app(app)
    return app


@pytest.fixture
def ran() -> list[str]:
    return []


@pytest.fixture
def app(ran: list[str]) -> Flask:
    return build_app(ran)


def connect(make_client: MakeClient, app: Flask, token: str, version: str = "2026-07-28") -> MCPTestClient:
    client = make_client(app, version, headers=bearer(token))
    if version != "2026-07-28":
        client.initialize()
    return client


def assert_insufficient_scope(response: MCPResponse, scope: str, named: str) -> None:
    """The step-up answer: 403, a challenge naming the missing scope, and a JSON-RPC error saying so."""
    assert response.status_code == 403
    challenge = response.headers["WWW-Authenticate"]
    assert 'error="insufficient_scope"' in challenge and f'scope="{scope}"' in challenge
    assert f'resource_metadata="{METADATA}"' in challenge
    error = response.error
    assert error["data"] == {"error": "insufficient_scope", "scope": scope}
    assert f"{named} needs the scope {scope}" in error["message"]


# ---------------------------------------------------------------------- decoration


@pytest.mark.parametrize(
    "register",
    [
        lambda mcp: mcp.resource("file:///a.txt", scopes=['files "read"']),
        lambda mcp: mcp.resource("app://items/{id}", scopes=["has space"]),
        lambda mcp: mcp.ui_resource("ui://view", scopes=["back\\slash"]),
        lambda mcp: mcp.prompt(name="p", scopes=['quote"']),
    ],
    ids=["resource", "template", "view", "prompt"],
)
def test_a_bad_scope_on_a_resource_template_view_or_prompt_fails_at_decoration_time(
    register: Callable[[MCP], Callable[[Any], Any]],
) -> None:
    mcp = MCP(name="bad-scopes")

    with pytest.raises(ValueError, match="invalid scope"):
        register(mcp)(lambda: None)

    assert len(mcp.resources) == 0 and len(mcp.prompts) == 0


def test_scopes_given_as_one_space_separated_string_are_split_like_for_tools() -> None:
    mcp = MCP(name="string-scopes")
    mcp.prompt(name="p", scopes="billing:read billing:write")(lambda: "hi")

    prompt = mcp.prompts.find("p")

    assert prompt is not None and prompt.scopes == ("billing:read", "billing:write")


# ---------------------------------------------------------------------- lists


@pytest.mark.parametrize("version", ALL_VERSIONS)
@pytest.mark.parametrize(
    ("token", "resources", "templates", "prompts"),
    [
        ("plain-token", {"file:///public.txt"}, {"app://docs/{slug}"}, {"greet"}),
        ("payroll-token", {"file:///public.txt", PAYROLL}, {"app://docs/{slug}"}, {"greet"}),
        ("boss-token", {"file:///public.txt", PAYROLL}, {"app://docs/{slug}", CUSTOMERS}, {"greet", "refund_letter"}),
    ],
)
def test_the_lists_show_each_caller_only_what_its_token_lets_it_use(
    make_client: MakeClient, app: Flask, version: str, token: str,
    resources: set[str], templates: set[str], prompts: set[str],
) -> None:
    client = connect(make_client, app, token, version)

    listed = client.list_resources().result
    listed_templates = client.list_resource_templates().result
    listed_prompts = client.list_prompts().result

    assert {r["uri"] for r in listed["resources"]} == resources
    assert {t["uriTemplate"] for t in listed_templates["resourceTemplates"]} == templates
    assert {p["name"] for p in listed_prompts["prompts"]} == prompts
    if version == "2026-07-28":  # each list depends on the token: no shared cache may keep it
        assert {r["cacheScope"] for r in (listed, listed_templates, listed_prompts)} == {"private"}


def test_the_filtered_lists_are_built_per_request_and_page_per_caller(make_client: MakeClient) -> None:
    app = build_app(MCP_PAGE_SIZE=1)
    plain = connect(make_client, app, "plain-token")
    boss = connect(make_client, app, "boss-token")

    for _ in range(2):  # interleaved: nothing one caller saw leaks into the other's pages
        assert names_across_pages(boss, "prompts/list", "prompts", "name") == ["greet", "refund_letter"]
        assert names_across_pages(plain, "prompts/list", "prompts", "name") == ["greet"]
        assert names_across_pages(plain, "resources/list", "resources", "uri") == ["file:///public.txt"]
        assert names_across_pages(boss, "resources/templates/list", "resourceTemplates", "uriTemplate") == [
            "app://docs/{slug}", CUSTOMERS,
        ]


def names_across_pages(client: MCPTestClient, method: str, key: str, field: str) -> list[str]:
    names: list[str] = []
    cursor: str | None = None
    while True:
        page = client.request(method, {"cursor": cursor} if cursor else {}).result
        names.extend(item[field] for item in page[key])
        cursor = page.get("nextCursor")
        if cursor is None:
            return names


def test_with_auth_off_scopes_are_not_checked_and_lists_keep_the_configured_cache_scope(
    make_client: MakeClient, ran: list[str]
) -> None:
    app = build_app(ran, MCP_AUTH=False)
    client = make_client(app)

    listed = client.list_resources().result

    assert {r["uri"] for r in listed["resources"]} == {"file:///public.txt", PAYROLL}
    assert listed["cacheScope"] == "public"  # MCP_CACHE_SCOPE's default
    assert client.read_resource(PAYROLL).result["contents"][0]["text"] == "name,salary"
    assert client.get_prompt("refund_letter", {"customer": "Ada"}).status_code == 200
    assert ran == ["payroll", "refund_letter"]


# ---------------------------------------------------------------------- read, get


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_reading_a_resource_without_its_scope_gets_403_and_the_function_never_runs(
    make_client: MakeClient, app: Flask, ran: list[str], version: str
) -> None:
    client = connect(make_client, app, "plain-token", version)

    response = client.read_resource(PAYROLL)

    assert_insufficient_scope(response, "payroll:read", f"Resource {PAYROLL!r}")
    assert ran == []


def test_reading_through_a_template_without_its_scope_gets_403_naming_the_template(
    make_client: MakeClient, app: Flask, ran: list[str]
) -> None:
    client = connect(make_client, app, "payroll-token")

    response = client.read_resource("app://customers/1001")

    assert_insufficient_scope(response, "crm", f"Resource template {CUSTOMERS!r}")
    assert ran == []


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_getting_a_prompt_without_its_scope_gets_403_before_its_arguments_are_looked_at(
    make_client: MakeClient, app: Flask, ran: list[str], version: str
) -> None:
    client = connect(make_client, app, "payroll-token", version)

    response = client.get_prompt("refund_letter")  # its required argument is missing, too

    assert_insufficient_scope(response, "billing:write", "Prompt 'refund_letter'")
    assert "payroll:read" in response.error["message"]  # what the token does grant
    assert ran == []


def test_a_broader_scope_grants_the_narrower_resource_template_and_prompt(
    make_client: MakeClient, app: Flask, ran: list[str]
) -> None:
    client = connect(make_client, app, "boss-token")  # "payroll" grants "payroll:read", "billing" "billing:write"

    payroll = client.read_resource(PAYROLL).result
    customer = client.read_resource("app://customers/1001").result
    letter = client.get_prompt("refund_letter", {"customer": "Ada"}).result

    assert payroll["contents"][0]["text"] == "name,salary"
    assert payroll["cacheScope"] == "private"
    assert customer["contents"][0]["text"] == '{"id":1001}'
    assert letter["messages"][0]["content"]["text"] == "Write a formal refund letter to Ada."
    assert ran == ["payroll", "customer", "refund_letter"]


def test_unguarded_resources_and_prompts_serve_a_token_without_scopes(make_client: MakeClient, app: Flask) -> None:
    client = connect(make_client, app, "plain-token")

    assert client.read_resource("app://docs/intro").result["contents"][0]["text"] == "doc intro"
    assert client.get_prompt("greet", {"name": "Ada"}).status_code == 200


# ---------------------------------------------------------------------- completion


@pytest.mark.parametrize(
    ("ref", "argument", "scope", "named"),
    [
        (REFUND, "tone", "billing:write", "Prompt 'refund_letter'"),
        (CUSTOMER_REF, "id", "crm", f"Resource template {CUSTOMERS!r}"),
    ],
)
def test_completing_an_argument_of_something_the_caller_may_not_use_gets_403(
    make_client: MakeClient, app: Flask, ref: dict[str, str], argument: str, scope: str, named: str
) -> None:
    client = connect(make_client, app, "plain-token")

    response = client.complete(ref, {"name": argument, "value": ""})

    assert_insufficient_scope(response, scope, named)


def test_completing_an_unknown_argument_without_the_scope_does_not_reveal_the_argument_names(
    make_client: MakeClient, app: Flask
) -> None:
    client = connect(make_client, app, "plain-token")

    response = client.complete(REFUND, {"name": "no_such_argument", "value": ""})

    assert response.status_code == 403  # not -32602 "has no argument ...": the scope comes first


def test_completing_with_the_scope_offers_the_values(make_client: MakeClient, app: Flask) -> None:
    client = connect(make_client, app, "boss-token", "2025-11-25")

    tones = client.complete(REFUND, {"name": "tone", "value": "f"}).result
    ids = client.complete(CUSTOMER_REF, {"name": "id", "value": "100"}).result

    assert tones["completion"]["values"] == ["formal", "friendly"]
    assert ids["completion"]["values"] == ["1001", "1002"]


# ---------------------------------------------------------------------- run time and views


def test_resources_prompts_and_views_added_at_run_time_take_scopes_too(make_client: MakeClient, app: Flask) -> None:
    mcp = app.extensions["mcp"].extension
    mcp.add_resource(lambda: "late", "file:///late.txt", scopes=["late"])
    mcp.add_prompt(lambda: "late", name="late_prompt", scopes=["late"])
    mcp.ui_resource("ui://secret-view", scopes=["late"])(lambda: "<!doctype html><p>hi</p>")
    client = connect(make_client, app, "boss-token")

    listed = {r["uri"] for r in client.list_resources().result["resources"]}

    assert "file:///late.txt" not in listed and "ui://secret-view" not in listed
    assert "late_prompt" not in {p["name"] for p in client.list_prompts().result["prompts"]}
    assert_insufficient_scope(client.read_resource("ui://secret-view"), "late", "Resource 'ui://secret-view'")


def test_protected_resource_metadata_lists_the_scopes_of_resources_and_prompts_too() -> None:
    from flask import Flask

    from flask_mcp import MCP

    app = Flask(__name__)
    app.config.update(MCP_AUTH=True, MCP_AUTH_SERVERS=["https://auth.example.com"], MCP_BACKEND="memory://")
    mcp = MCP(app)

    @mcp.tool(scopes=["tools:run"])
    def run() -> str:
        """Runs."""
        return "ran"

    @mcp.resource("notes://today", scopes=["notes:read"])
    def today() -> str:
        """Today's note."""
        return "note"

    @mcp.prompt(scopes=["prompts:use"])
    def greet() -> str:
        """Greets."""
        return "hello"

    @mcp.token_verifier
    def verify(token: str) -> None:
        return None

    document = app.test_client().get("/.well-known/oauth-protected-resource").get_json()
    assert document["scopes_supported"] == ["notes:read", "prompts:use", "tools:run"]
