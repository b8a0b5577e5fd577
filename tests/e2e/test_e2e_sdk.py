"""End to end: the official Python MCP client (``mcp`` 2.3.0) against the
example bookshop served by real gunicorn on loopback.

Default mode speaks 2026-07-28 (``server/discover``, no session); legacy mode
speaks 2025-11-25 (``initialize`` + ``Mcp-Session-Id``). Some tests hand the
SDK an ``httpx2`` client with event hooks so the exchanges it made can be
checked too: nothing is mocked, the hooks only record what crossed the socket.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date
from typing import Any, TypeVar

import httpx2
import pytest
from conftest import validate_message
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

pytestmark = pytest.mark.e2e

T = TypeVar("T")

TOOL_NAMES = {"search_books", "get_book", "reserve_book", "opening_hours"}
AUSTEN = {
    "isbn": "9780141439518",
    "title": "Pride and Prejudice",
    "author": "Jane Austen",
    "year": 1813,
    "price_eur": 7.5,
    "in_stock": 4,
}
UNKNOWN_ISBN = "0000000000000"
CLIENT_INFO = Implementation(name="e2e-suite", version="9.9.9")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@dataclass
class Exchange:
    method: str  # HTTP method
    rpc_method: str | None  # JSON-RPC method of the request body, if any
    request_headers: dict[str, str]
    status: int
    response_headers: dict[str, str]
    body: Any  # parsed JSON answer, or None when the answer is empty / not JSON


class WireLog:
    """Records every HTTP exchange the SDK makes (request and full answer)."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []

    async def _on_response(self, response: httpx2.Response) -> None:
        await response.aread()
        request = response.request
        rpc_method = None
        if request.content:
            sent = json.loads(request.content)
            rpc_method = sent.get("method") if isinstance(sent, dict) else None
        body = None
        if response.content and response.headers.get("content-type", "").startswith("application/json"):
            body = json.loads(response.content)
        self.exchanges.append(
            Exchange(
                method=request.method,
                rpc_method=rpc_method,
                request_headers={k.lower(): v for k, v in request.headers.items()},
                status=response.status_code,
                response_headers={k.lower(): v for k, v in response.headers.items()},
                body=body,
            )
        )

    def http_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(event_hooks={"response": [self._on_response]}, timeout=20)


async def _recorded(url: str, mode: str, body: Callable[[Client], Awaitable[T]]) -> tuple[T, WireLog]:
    log = WireLog()
    async with log.http_client() as http:
        async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            outcome = await body(client)
    return outcome, log


def _text(result: Any) -> str:
    assert result.content, "a tool result always carries content"
    assert result.content[0].type == "text"
    return str(result.content[0].text)


# ---------------------------------------------------------------- default mode (2026-07-28)


def test_default_client_negotiates_2026_and_learns_who_the_server_is(example_server: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(example_server.url, client_info=CLIENT_INFO) as client:
            return client.protocol_version, client.server_info, client.instructions

    version, info, instructions = run(scenario())

    assert version == "2026-07-28"
    assert info is not None and info.name == "bookshop" and info.version == "1.0.0"
    assert info.title == "Corner Bookshop"
    # The instructions are computed per request from the client's own _meta clientInfo.
    assert instructions is not None and "Corner Bookshop" in instructions and "e2e-suite" in instructions


def test_default_client_lists_the_four_bookshop_tools_with_their_schemas(example_server: Any) -> None:
    async def scenario() -> Any:
        async with Client(example_server.url) as client:
            return await client.list_tools()

    listing = run(scenario())

    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == TOOL_NAMES
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert tool.description
    assert tools["search_books"].input_schema["required"] == ["query"]
    assert tools["search_books"].input_schema["properties"]["limit"]["maximum"] == 20
    for name in ("search_books", "get_book", "reserve_book"):
        assert tools[name].output_schema is not None and tools[name].output_schema["type"] == "object"
    assert set(tools["search_books"].output_schema["properties"]) == {"query", "books"}
    assert tools["reserve_book"].title == "Reserve a book"
    assert listing.cache_scope in ("public", "private") and listing.ttl_ms >= 0


def test_default_client_calls_search_books_and_gets_structured_and_text_content(example_server: Any) -> None:
    async def scenario() -> Any:
        async with Client(example_server.url) as client:
            return await client.call_tool("search_books", {"query": "austen"})

    result = run(scenario())

    assert result.is_error is False
    assert result.structured_content == {"query": "austen", "books": [AUSTEN]}
    # The text block carries the same data serialized, for clients that ignore structured content.
    assert json.loads(_text(result)) == result.structured_content


def test_default_client_gets_an_error_result_for_an_unknown_isbn(example_server: Any) -> None:
    async def scenario() -> Any:
        async with Client(example_server.url) as client:
            return await client.call_tool("get_book", {"isbn": UNKNOWN_ISBN})

    result = run(scenario())

    assert result.is_error is True
    assert _text(result) == f"No book with ISBN {UNKNOWN_ISBN}; use search_books to find one."
    assert result.structured_content is None


def test_default_client_exchanges_only_schema_valid_stateless_messages(example_server: Any) -> None:
    async def scenario(client: Client) -> None:
        await client.list_tools()
        await client.call_tool("opening_hours", {})
        await client.call_tool("get_book", {"isbn": AUSTEN["isbn"]})

    _, log = run(_recorded(example_server.url, "auto", scenario))

    assert log.exchanges[0].rpc_method == "server/discover"
    assert [e.rpc_method for e in log.exchanges].count("tools/call") == 2
    for exchange in log.exchanges:
        assert exchange.method == "POST"
        assert exchange.status == 200
        assert "mcp-session-id" not in exchange.request_headers
        assert "mcp-session-id" not in exchange.response_headers
        assert exchange.body is not None and "result" in exchange.body
        validate_message("2026-07-28", exchange.rpc_method, exchange.body)
        result = exchange.body["result"]
        assert result["resultType"] == "complete"
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bookshop"


# ---------------------------------------------------------------- legacy mode (2025-11-25)


def test_legacy_client_negotiates_2025_11_25_and_learns_who_the_server_is(example_server: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(example_server.url, mode="legacy", client_info=CLIENT_INFO) as client:
            return client.protocol_version, client.server_info, client.instructions

    version, info, instructions = run(scenario())

    assert version == "2025-11-25"
    assert info is not None and info.name == "bookshop" and info.version == "1.0.0"
    assert instructions is not None and "Corner Bookshop" in instructions and "e2e-suite" in instructions


def test_legacy_client_lists_tools_and_calls_search_books(example_server: Any) -> None:
    async def scenario() -> tuple[Any, Any, Any]:
        async with Client(example_server.url, mode="legacy") as client:
            listing = await client.list_tools()
            found = await client.call_tool("search_books", {"query": "austen"})
            missing = await client.call_tool("get_book", {"isbn": UNKNOWN_ISBN})
            return listing, found, missing

    listing, found, missing = run(scenario())

    tools = {tool.name: tool for tool in listing.tools}
    assert set(tools) == TOOL_NAMES
    assert all(tool.input_schema["type"] == "object" for tool in tools.values())
    assert tools["get_book"].output_schema is not None
    assert found.is_error is False
    assert found.structured_content == {"query": "austen", "books": [AUSTEN]}
    assert json.loads(_text(found)) == found.structured_content
    assert missing.is_error is True
    assert _text(missing) == f"No book with ISBN {UNKNOWN_ISBN}; use search_books to find one."


def test_legacy_client_keeps_one_session_across_several_calls_and_ends_it(example_server: Any) -> None:
    async def scenario(client: Client) -> list[Any]:
        return [
            await client.list_tools(),
            await client.call_tool("opening_hours", {}),
            await client.call_tool("get_book", {"isbn": "9780547928227"}),
            await client.call_tool("reserve_book", {"isbn": "9780547928227", "customer": "Ada"}),
            await client.call_tool("reserve_book", {"isbn": "9780451524935", "customer": "Ada"}),
            await client.call_tool("search_books", {"query": "tolkien hobbit"}),
        ]

    (listing, hours, hobbit, reservation, sold_out, search), log = run(
        _recorded(example_server.url, "legacy", scenario)
    )

    assert len(listing.tools) == 4
    assert _text(hours) == "Monday to Saturday, 9:00 to 19:00; closed on Sundays."
    assert hobbit.structured_content["title"] == "The Hobbit"
    assert reservation.is_error is False
    assert reservation.structured_content["status"] == "reserved"
    pick_up = date.fromisoformat(reservation.structured_content["pick_up_by"])
    assert 2 <= (pick_up - date.today()).days <= 3  # three days from the server's today
    assert sold_out.is_error is True and "out of stock" in _text(sold_out)
    assert [b["isbn"] for b in search.structured_content["books"]] == ["9780547928227"]

    first = log.exchanges[0]
    assert first.rpc_method == "initialize" and first.status == 200
    assert "mcp-protocol-version" not in first.request_headers
    session_id = first.response_headers["mcp-session-id"]
    assert session_id and all(0x21 <= ord(c) <= 0x7E for c in session_id)
    validate_message("2025-11-25", "initialize", first.body)

    later = log.exchanges[1:]
    posts = [e for e in later if e.method == "POST"]
    assert [e.rpc_method for e in posts].count("tools/call") == 5
    for exchange in later:
        # The same session, on every request: nothing was re-initialized.
        assert exchange.request_headers["mcp-session-id"] == session_id
        assert exchange.request_headers["mcp-protocol-version"] == "2025-11-25"
        assert exchange.rpc_method != "initialize"
        assert exchange.status not in (400, 404) and exchange.status < 500
        if exchange.body is not None:
            validate_message("2025-11-25", exchange.rpc_method, exchange.body)
    initialized = [e for e in later if e.rpc_method == "notifications/initialized"]
    assert [e.status for e in initialized] == [202]
    deletes = [e for e in later if e.method == "DELETE"]
    assert [e.status for e in deletes] == [200]
    assert later[-1].method == "DELETE"


# ---------------------------------------------------------------- both modes


@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(
    ("arguments", "field"),
    [({"query": "austen", "limit": 999}, "limit"), ({"limit": 3}, "query")],
    ids=["limit-too-large", "query-missing"],
)
def test_invalid_tool_arguments_come_back_as_an_error_result(
    example_server: Any, mode: str, arguments: dict[str, Any], field: str
) -> None:
    async def scenario() -> Any:
        async with Client(example_server.url, mode=mode) as client:
            return await client.call_tool("search_books", arguments)

    result = run(scenario())

    assert result.is_error is True
    assert field in _text(result)
    assert result.structured_content is None
