"""End to end: the caller is the app's own user. A factory-layout app
(tests/login_app/: Flask-Login, Flask-SQLAlchemy on a SQLite file, its own API
tokens checked by ``@mcp.verify_token``, tools written against
``current_user``) under real gunicorn with two workers; two users call it
through the official Python client ``mcp`` 2.3.0 in both its modes, with
their bearer tokens. The database shows every write made as the right user;
a browser's session cookie alone gets 401, and beside another user's token
changes nothing."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Awaitable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import pytest
import requests
from conftest import GunicornServer
from login_app.factory import create_app, seed
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

pytestmark = pytest.mark.e2e

T = TypeVar("T")
USERS = {"ann": ("ann-password", "ann-api-token-1"), "bob": ("bob-password", "bob-api-token-2")}
MODES = ["auto", "legacy"]  # 2026-07-28, and 2025-11-25 (initialize + Mcp-Session-Id)


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


class Server:
    def __init__(self, gunicorn: GunicornServer, database: Path) -> None:
        self.gunicorn = gunicorn
        self.url = gunicorn.url
        self.root = gunicorn.url.removesuffix("/mcp")
        self.database = database
        #: Every Set-Cookie header the MCP endpoint sent to the SDK.
        self.cookies_set: list[str] = []

    def notes(self) -> list[tuple[str, str]]:
        """(author's name, text) of every note, read from the database file itself."""
        with sqlite3.connect(self.database) as connection:
            rows = connection.execute(
                'SELECT "user".name, note.text FROM note JOIN "user" ON "user".id = note.author_id ORDER BY note.id')
            return [(name, text) for name, text in rows]

    def browser_cookies(self, name: str) -> requests.cookies.RequestsCookieJar:
        """Sign in through the app's Flask-Login view, as a browser would."""
        browser = requests.Session()
        signed_in = browser.post(self.root + "/login", data={"name": name, "password": USERS[name][0]}, timeout=10)
        assert signed_in.status_code == 200 and signed_in.text == f"signed in as {name}"
        assert browser.get(self.root + "/me", timeout=10).text == name
        return browser.cookies

    def http(self, user: str | None, cookies: Any = None) -> httpx2.AsyncClient:
        headers = {"Authorization": f"Bearer {USERS[user][1]}"} if user else {}

        async def record(response: httpx2.Response) -> None:
            self.cookies_set.extend(response.headers.get_list("set-cookie"))

        return httpx2.AsyncClient(headers=headers, cookies=cookies, timeout=20,
                                  event_hooks={"response": [record]})


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    folder = tmp_path_factory.mktemp("login-app")
    database = folder / "notes.sqlite3"
    seeder = create_app({"SQLALCHEMY_DATABASE_URI": f"sqlite:///{database}", "MCP_BACKEND": "memory://",
                         "TESTING": True})
    seed(seeder, USERS)
    gunicorn = GunicornServer("tests.login_app.factory:create_app()", workers=2, env={
        "LOGIN_APP_DATABASE": str(database), "LOGIN_APP_SECRET": "e2e-login-secret"})
    try:
        yield Server(gunicorn, database)
    finally:
        gunicorn.stop()


async def _text(client: Client, tool: str, arguments: dict[str, Any], heard: list[float] | None = None) -> str:
    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        assert heard is not None
        heard.append(progress)

    result = await client.call_tool(tool, arguments, progress_callback=on_progress if heard is not None else None)
    block = result.content[0]
    assert isinstance(block, TextContent), result
    assert not result.is_error, block.text
    return block.text


async def _as_user(server: Server, user: str, mode: str, cookies: Any = None) -> dict[str, Any]:
    """One connection of the SDK as ``user``: write two notes, read "my notes"."""
    async with server.http(user, cookies) as http:
        async with Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:
            pids = set()
            for number in (1, 2):
                written = await client.call_tool("add_note", {"text": f"{user} {mode} {number}"})
                assert written.structured_content is not None, written
                assert written.structured_content["author"] == user
                pids.add(written.structured_content["pid"])
            progress: list[float] = []
            streamed = await _text(client, "slow_note", {"text": f"{user} {mode} streamed"}, progress)
            assert progress == [1]
            mine = await client.call_tool("my_notes", {})
            whoami = await client.call_tool("whoami", {})
            return {"version": client.protocol_version, "pids": pids, "streamed": streamed,
                    "mine": mine.structured_content, "whoami": whoami.structured_content}


@pytest.mark.parametrize("mode", MODES)
def test_each_user_writes_and_reads_as_themselves(server: Server, mode: str) -> None:
    async def both() -> list[dict[str, Any]]:
        return list(await asyncio.gather(_as_user(server, "ann", mode), _as_user(server, "bob", mode)))

    ann, bob = run(both())
    assert ann["version"] == bob["version"] == ("2026-07-28" if mode == "auto" else "2025-11-25")
    for name, outcome in (("ann", ann), ("bob", bob)):
        assert outcome["whoami"] == {"current_user": name, "ctx_user": name, "subject": outcome["whoami"]["subject"]}
        assert outcome["streamed"] == f"{name} on flask-mcp-request"
        own = [f"{name} {mode} 1", f"{name} {mode} 2", f"{name} {mode} streamed"]
        mine = outcome["mine"]["result"]  # a list result, wrapped as its output schema says
        assert [note for note in mine if note in own] == own
        assert all(note.startswith(f"{name} ") for note in mine)  # only their own, whatever ran before
    written = [(author, text) for author, text in server.notes() if f" {mode} " in text]
    assert sorted(written) == sorted([(name, f"{name} {mode} {n}") for name in USERS for n in ("1", "2", "streamed")])
    assert all(text.startswith(author) for author, text in server.notes())
    assert server.cookies_set == []


def test_a_session_cookie_alone_gets_401(server: Server) -> None:
    cookies = server.browser_cookies("ann")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "my_notes", "arguments": {}}}
    refused = requests.post(server.url, json=body, cookies=cookies, timeout=10, headers={
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
        "Mcp-Method": "tools/call", "Mcp-Name": "my_notes"})
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith("Bearer ")
    assert "Set-Cookie" not in refused.headers
    assert json.loads(refused.text)["error"]["message"].startswith("Authentication required")


@pytest.mark.parametrize("mode", MODES)
def test_a_token_beside_another_users_cookie_is_served_as_the_tokens_user(server: Server, mode: str) -> None:
    bobs_cookies = server.browser_cookies("bob")
    before = len(server.notes())

    async def as_ann_with_bobs_cookie() -> dict[str, Any]:
        async with server.http("ann", httpx2.Cookies(dict(bobs_cookies))) as http:
            async with Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:
                await client.call_tool("add_note", {"text": f"ann {mode} beside bob's cookie"})
                whoami = (await client.call_tool("whoami", {})).structured_content
                assert whoami is not None
                return dict(whoami)

    assert run(as_ann_with_bobs_cookie())["current_user"] == "ann"
    assert server.notes()[before:] == [("ann", f"ann {mode} beside bob's cookie")]
    assert server.cookies_set == []


@pytest.mark.parametrize("mode", MODES)
def test_an_async_tool_sees_the_caller_as_current_user(server: Server, mode: str) -> None:
    async def call() -> str:
        async with server.http("bob") as http:
            async with Client(streamable_http_client(server.url, http_client=http), mode=mode) as client:
                return await _text(client, "add_note_async", {"text": f"bob {mode} async"})

    assert run(call()).endswith("by bob")
    assert ("bob", f"bob {mode} async") in server.notes()
