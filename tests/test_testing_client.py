"""The test client users drive their servers with: its DELETE carries what
every request carries, and its resource, prompt and completion helpers send
the method's params and headers in both eras.

What the client sent is recorded by a ``before_request`` hook on the app, so
these tests see the real HTTP requests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from conftest import ALL_VERSIONS, LEGACY_VERSIONS, connect
from flask import Flask, request

from flask_mcp import MCP
from flask_mcp.auth import Principal
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

TOKENS = {"alice-token": Principal(subject="alice", scopes=frozenset({"notes"}), audience=("http://localhost/mcp",))}

Seen = list[tuple[str, dict[str, str]]]


def build_app(seen: Seen, **config: Any) -> Flask:
    """A server with a resource, a template, a prompt and completers; ``seen``
    collects the method and headers of every HTTP request it receives."""
    app = Flask("testing-client")
    app.config.update({"MCP_BACKEND": "memory://", **config})
    mcp = MCP(app, name="testing-client", version="1.0")
    mcp.token_verifier(TOKENS.get)

    @app.before_request
    def record() -> None:
        seen.append((request.method, dict(request.headers)))

    @mcp.resource("file:///readme.txt")
    def readme() -> str:
        return "read me"

    @mcp.resource("file:///changes.txt")
    def changes() -> str:
        return "nothing yet"

    @mcp.resource("notes://{owner}/{title}", complete={"owner": ["alice", "bob"]})
    def note(owner: str, title: str) -> str:
        return f"{owner}'s note {title}"

    @mcp.resource("notes://archive/{year}")
    def archive(year: int) -> str:
        return f"archive {year}"

    @mcp.prompt
    def summarize(topic: str, length: str = "short") -> str:
        """Summarize a topic."""
        return f"Summarize {topic} ({length})."

    @mcp.prompt
    def translate(text: str) -> str:
        return f"Translate: {text}"

    @mcp.completion(resource="notes://{owner}/{title}", argument="title")
    def titles(value: str, arguments: dict[str, str]) -> list[str]:
        return [f"{arguments.get('owner', 'nobody')}-{value}"]

    return app


@pytest.fixture
def seen() -> Seen:
    return []


@pytest.fixture
def app(seen: Seen) -> Flask:
    return build_app(seen)


def last_headers(seen: Seen, method: str = "POST") -> dict[str, str]:
    return next(headers for verb, headers in reversed(seen) if verb == method)


# ---------------------------------------------------------------------- delete


def test_delete_carries_the_bearer_token_so_an_authenticated_client_can_end_its_session(
    make_client: MakeClient, seen: Seen
) -> None:
    app = build_app(seen, MCP_AUTH=True, MCP_AUTH_SERVERS=["https://auth.example.com"])
    client = connect(make_client, app, "2025-11-25", headers={"Authorization": "Bearer alice-token"})

    ended = client.delete()

    assert ended.status_code == 200  # not 401: the token went along
    assert last_headers(seen, "DELETE")["Authorization"] == "Bearer alice-token"
    assert client.request("tools/list").status_code == 404  # the session is gone


@pytest.mark.parametrize("version", LEGACY_VERSIONS)
def test_delete_repeats_the_session_id_and_the_negotiated_protocol_version(
    make_client: MakeClient, app: Flask, seen: Seen, version: str
) -> None:
    client = connect(make_client, app, version, headers={"X-Tenant": "acme"})

    assert client.delete().status_code == 200

    headers = last_headers(seen, "DELETE")
    assert headers["Mcp-Session-Id"] == client.session_id
    assert headers["X-Tenant"] == "acme"
    if version == "2025-03-26":  # that revision has no version header
        assert "Mcp-Protocol-Version" not in headers
    else:
        assert headers["Mcp-Protocol-Version"] == version


def test_a_2026_client_delete_says_its_protocol_version_and_is_refused_for_want_of_a_session(
    make_client: MakeClient, app: Flask, seen: Seen
) -> None:
    client = make_client(app)

    response = client.delete()

    assert response.status_code == 400  # 2026-07-28 has no sessions to end
    assert last_headers(seen, "DELETE")["Mcp-Protocol-Version"] == "2026-07-28"


# ---------------------------------------------------------------------- helpers


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_the_resource_helpers_list_templates_and_read_in_every_revision(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = connect(make_client, app, version)

    resources = client.list_resources().result["resources"]
    templates = client.list_resource_templates().result["resourceTemplates"]
    read = client.read_resource("notes://alice/groceries").result

    assert [r["uri"] for r in resources] == ["file:///readme.txt", "file:///changes.txt"]
    assert [t["uriTemplate"] for t in templates] == ["notes://{owner}/{title}", "notes://archive/{year}"]
    assert read["contents"][0]["text"] == "alice's note groceries"


@pytest.mark.parametrize("version", ALL_VERSIONS)
def test_the_prompt_helpers_list_and_get_with_arguments_in_every_revision(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = connect(make_client, app, version)

    prompts = client.list_prompts().result["prompts"]
    got = client.get_prompt("summarize", {"topic": "tides", "length": "long"}).result

    assert [p["name"] for p in prompts] == ["summarize", "translate"]
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Summarize tides (long)."}}]


def test_get_prompt_without_arguments_sends_none_and_the_server_names_the_missing_one(
    make_client: MakeClient, app: Flask
) -> None:
    client = make_client(app)

    error = client.get_prompt("summarize").error

    assert error["code"] == -32602 and "topic" in error["message"]


def test_the_list_helpers_follow_cursors_page_by_page(make_client: MakeClient, seen: Seen) -> None:
    app = build_app(seen, MCP_PAGE_SIZE=1)
    client = make_client(app)

    for list_page, key, field in (
        (client.list_resources, "resources", "uri"),
        (client.list_resource_templates, "resourceTemplates", "uriTemplate"),
        (client.list_prompts, "prompts", "name"),
    ):
        first = list_page().result
        second = list_page(first["nextCursor"]).result

        assert len(first[key]) == len(second[key]) == 1
        assert first[key][0][field] != second[key][0][field]
        assert "nextCursor" not in second


@pytest.mark.parametrize(
    ("call", "method", "name"),
    [
        (lambda c: c.read_resource("file:///readme.txt"), "resources/read", "file:///readme.txt"),
        (lambda c: c.get_prompt("translate", {"text": "hola"}), "prompts/get", "translate"),
        (lambda c: c.list_resources(), "resources/list", None),
        (lambda c: c.list_resource_templates(), "resources/templates/list", None),
        (lambda c: c.list_prompts(), "prompts/list", None),
        (lambda c: c.complete({"type": "ref/prompt", "name": "summarize"}, {"name": "topic", "value": ""}),
         "completion/complete", None),
    ],
)
def test_each_helper_sends_the_2026_standard_headers(
    make_client: MakeClient, app: Flask, seen: Seen,
    call: Callable[[MCPTestClient], Any], method: str, name: str | None,
) -> None:
    client = make_client(app)

    assert call(client).status_code == 200

    headers = last_headers(seen)
    assert headers["Mcp-Method"] == method
    assert headers["Mcp-Protocol-Version"] == "2026-07-28"
    assert headers.get("Mcp-Name") == name


@pytest.mark.parametrize("version", ("2026-07-28", "2025-11-25", "2025-06-18"))
def test_complete_sends_the_other_arguments_as_context(make_client: MakeClient, app: Flask, version: str) -> None:
    client = connect(make_client, app, version)
    ref = {"type": "ref/resource", "uri": "notes://{owner}/{title}"}

    with_context = client.complete(ref, {"name": "title", "value": "gro"}, {"owner": "alice"}).result
    without = client.complete(ref, {"name": "title", "value": "gro"}).result
    owners = client.complete(ref, {"name": "owner", "value": "b"}).result

    assert with_context["completion"]["values"] == ["alice-gro"]
    assert without["completion"]["values"] == ["nobody-gro"]
    assert owners["completion"]["values"] == ["bob"]


def test_the_helpers_carry_the_legacy_session_headers(make_client: MakeClient, app: Flask, seen: Seen) -> None:
    client = connect(make_client, app, "2025-11-25")

    client.read_resource("file:///readme.txt")

    headers = last_headers(seen)
    assert headers["Mcp-Session-Id"] == client.session_id
    assert headers["Mcp-Protocol-Version"] == "2025-11-25"
    assert "Mcp-Method" not in headers  # a 2026-07-28 header only
