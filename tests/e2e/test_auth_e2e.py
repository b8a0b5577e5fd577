"""End to end with real sockets: the official Python MCP client (``mcp``
2.3.0) with a bearer token, against tests/auth_app.py under gunicorn (two
workers), whose tokens are introspected at tests/auth_servers.py running as a
third process. Default mode (2026-07-28) and legacy mode (2025-11-25)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
import requests
from auth_servers import AuthServer
from conftest import GunicornServer, validate_message
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

pytestmark = pytest.mark.e2e

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@pytest.fixture
def auth_server(tmp_path: Path) -> Iterator[AuthServer]:
    server = AuthServer(tmp_path / "as-state.json").start()
    yield server
    server.stop()


@pytest.fixture
def protected(
    gunicorn_server: Callable[..., GunicornServer], auth_server: AuthServer, tmp_path: Path
) -> GunicornServer:
    server = gunicorn_server(
        "tests.auth_app:app",
        workers=2,
        env={
            "FLASK_MCP_AUTH": "true",
            "FLASK_MCP_INTROSPECTION_URL": auth_server.introspection_url,
            "FLASK_MCP_AUTH_SERVERS": json.dumps([auth_server.url]),
            "FLASK_MCP_BACKEND": f"sqlite:///{tmp_path / 'sessions.sqlite3'}",
        },
    )
    # The audience is the endpoint's own URL, as the server derives it from the request.
    auth_server.add_tokens({
        "reader-token": {"sub": "reader", "scope": "files:read", "aud": server.url, "active": True},
        "admin-token": {"sub": "admin", "scope": "files admin", "aud": server.url},
    })
    return server


class Recorder:
    """Every HTTP exchange the SDK made (nothing is changed, only recorded)."""

    def __init__(self) -> None:
        self.exchanges: list[dict[str, Any]] = []

    async def _on_response(self, response: httpx2.Response) -> None:
        await response.aread()
        body = None
        if response.headers.get("content-type", "").startswith("application/json") and response.content:
            body = json.loads(response.content)
        sent = json.loads(response.request.content) if response.request.content else {}
        self.exchanges.append({
            "method": response.request.method,
            "rpc": sent.get("method") if isinstance(sent, dict) else None,
            "authorization": response.request.headers.get("authorization"),
            "status": response.status_code,
            "session": response.headers.get("mcp-session-id"),
            "body": body,
        })

    def client(self, token: str | None, **headers: str) -> httpx2.AsyncClient:
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        return httpx2.AsyncClient(headers=headers, event_hooks={"response": [self._on_response]}, timeout=20)


async def _session(url: str, mode: str, token: str, recorder: Recorder, **headers: str) -> dict[str, Any]:
    async with recorder.client(token, **headers) as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            outcome: dict[str, Any] = {"version": client.protocol_version}
            outcome["tools"] = {tool.name for tool in (await client.list_tools()).tools}
            outcome["whoami"] = (await client.call_tool("whoami", {})).structured_content
            read = (await client.call_tool("read_file", {"path": "notes.txt"})).content[0]
            assert isinstance(read, TextContent), read
            outcome["read"] = read.text
            with pytest.raises(MCPError) as refused:
                await client.call_tool("purge", {})
            outcome["refused"] = str(refused.value)
            if mode == "legacy":
                session = next(e["session"] for e in recorder.exchanges if e["rpc"] == "initialize")
                outcome["stolen"] = _stolen_session_status(url, session)
                outcome["again"] = (await client.call_tool("whoami", {})).structured_content
    return outcome


def _stolen_session_status(url: str, session: str) -> int:
    """Another token presenting the live session id."""
    response = requests.post(
        url,
        json={"jsonrpc": "2.0", "id": 99, "method": "tools/list"},
        headers={"Authorization": "Bearer admin-token", "Mcp-Session-Id": session,
                 "MCP-Protocol-Version": "2025-11-25", "Accept": "application/json, text/event-stream"},
        timeout=10,
    )
    return response.status_code


@pytest.mark.parametrize(("mode", "version"), [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
def test_the_sdk_client_completes_an_authenticated_session(
    protected: GunicornServer, auth_server: AuthServer, mode: str, version: str
) -> None:
    recorder = Recorder()

    outcome = run(_session(protected.url, mode, "reader-token", recorder, **{"X-Account-Id": "acct-42"}))

    assert outcome["version"] == version
    assert outcome["tools"] == {"whoami", "read_file"}  # not "purge": it needs the admin scope
    assert outcome["whoami"]["subject"] == "reader"
    assert outcome["whoami"]["scopes"] == ["files:read"]
    assert outcome["whoami"]["account"] == "acct-42"
    assert outcome["read"] == "contents of notes.txt"
    assert "needs the scope admin" in outcome["refused"]
    for exchange in recorder.exchanges:
        assert exchange["authorization"] == "Bearer reader-token"
        if exchange["body"] is not None and exchange["status"] < 300:
            validate_message(version, exchange["rpc"], exchange["body"])
    refusals = [e for e in recorder.exchanges if e["status"] == 403]
    assert len(refusals) == 1 and refusals[0]["body"]["error"]["data"]["error"] == "insufficient_scope"
    if mode == "legacy":
        assert outcome["stolen"] == 404  # the session belongs to the reader
        assert outcome["again"]["subject"] == "reader"  # ...who keeps using it
        assert [e["status"] for e in recorder.exchanges if e["method"] == "DELETE"] == [200]
    else:
        assert all(e["session"] is None for e in recorder.exchanges)
    # The token was introspected once per worker (twice when two of a worker's
    # threads missed its cache at the same moment); the rest came from the cache.
    assert 1 <= auth_server.stats()["introspect"] <= 4


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_the_sdk_client_without_a_token_is_refused_with_a_readable_error(protected: GunicornServer, mode: str) -> None:
    recorder = Recorder()

    async def scenario() -> None:
        async with recorder.client(None) as http:
            async with Client(streamable_http_client(protected.url, http_client=http), mode=mode) as client:
                await client.list_tools()

    # The SDK raises (inside its task groups). It reads a JSON-RPC error body only
    # when it has an "id" (null allowed); ours has none (the schemas reject null),
    # so the SDK reports a generic error, while raw-body clients show our message.
    with pytest.raises(BaseExceptionGroup) as refused:
        run(scenario())

    assert refused.group_contains(MCPError)
    first = recorder.exchanges[0]
    assert first["status"] == 401
    assert 'resource_metadata="' in requests.post(protected.url, json={}, timeout=10).headers["WWW-Authenticate"]
    assert first["body"]["error"]["message"].startswith("Authentication required")


def test_the_protected_resource_metadata_is_served_under_gunicorn(
    protected: GunicornServer, auth_server: AuthServer
) -> None:
    unauthenticated = requests.post(protected.url, json={}, timeout=10)
    challenge = unauthenticated.headers["WWW-Authenticate"]
    metadata_url = challenge.split('resource_metadata="', 1)[1].split('"', 1)[0]

    document = requests.get(metadata_url, timeout=10).json()

    assert metadata_url == protected.url.replace("/mcp", "/.well-known/oauth-protected-resource/mcp")
    assert document["resource"] == protected.url
    assert document["authorization_servers"] == [auth_server.url]
    assert document["scopes_supported"] == ["admin", "files:read"]
