"""End to end over raw HTTP (``requests``, real sockets): the example bookshop
under real gunicorn on loopback. Every JSON body the server sends is checked
against the official schema of the revision in use."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
import requests
from conftest import validate_message

pytestmark = pytest.mark.e2e

TIMEOUT = 20
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "e2e-http", "version": "1.0.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
MAX_BODY = 4 * 1024 * 1024


def modern_headers(method: str, name: str | None = None) -> dict[str, str]:
    headers = {**ACCEPT, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method}
    if name is not None:
        headers["Mcp-Name"] = name
    return headers


def modern_request(request_id: Any, method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**params, "_meta": META}}


def discover_body(request_id: Any = "discover-1") -> dict[str, Any]:
    return modern_request(request_id, "server/discover")


def json_of(response: requests.Response) -> Any:
    """The JSON body, after checking the answer is JSON (never HTML, never a 500)."""
    assert response.status_code < 500, response.text
    assert response.headers.get("Content-Type", "").startswith("application/json"), response.headers
    return response.json()


def assert_error(response: requests.Response, status: int, code: int, version: str = "2026-07-28") -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = json_of(response)
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    validate_message(version, None, body)
    return body  # type: ignore[no-any-return]


def host_of(url: str) -> tuple[str, int]:
    match = re.match(r"http://([^:/]+):(\d+)/", url)
    assert match
    return match.group(1), int(match.group(2))


# ---------------------------------------------------------------- legacy flow


def test_legacy_session_lives_from_initialize_to_delete_and_is_gone_afterwards(example_server: Any) -> None:
    url = example_server.url
    with requests.Session() as http:
        # id 0 is an ordinary id (the TypeScript SDK starts there); no version header on initialize.
        init = http.post(
            url,
            headers=ACCEPT,
            timeout=TIMEOUT,
            json={
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "e2e-http", "version": "1.0.0"},
                },
            },
        )
        assert init.status_code == 200
        body = json_of(init)
        validate_message("2025-11-25", "initialize", body)
        assert body["id"] == 0
        assert body["result"]["protocolVersion"] == "2025-11-25"
        assert body["result"]["serverInfo"]["name"] == "bookshop"
        assert "tools" in body["result"]["capabilities"]
        session_id = init.headers["Mcp-Session-Id"]
        assert re.fullmatch(r"[\x21-\x7e]+", session_id)
        session = {**ACCEPT, "Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}

        initialized = http.post(
            url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=TIMEOUT
        )
        assert initialized.status_code == 202
        assert initialized.content == b""

        listed = http.post(
            url, headers=session, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, timeout=TIMEOUT
        )
        assert listed.status_code == 200
        body = json_of(listed)
        validate_message("2025-11-25", "tools/list", body)
        assert body["id"] == 1
        assert {t["name"] for t in body["result"]["tools"]} == {
            "search_books",
            "get_book",
            "reserve_book",
            "opening_hours",
        }

        # A legacy unknown method is a JSON-RPC error at HTTP 200: a 404 would read as "session gone".
        unknown = http.post(
            url, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "books/burn"}, timeout=TIMEOUT
        )
        body = assert_error(unknown, 200, -32601, "2025-11-25")
        assert body["id"] == 2

        # No standalone stream: 405 with Allow, even with the JSON Content-Type the SDK sends on GET.
        stream = http.get(url, headers={**session, "Cache-Control": "no-store"}, timeout=TIMEOUT)
        assert stream.status_code == 405
        assert "POST" in stream.headers["Allow"]
        if stream.content:
            validate_message("2025-11-25", None, json_of(stream))

        ended = http.delete(url, headers=session, timeout=TIMEOUT)
        assert ended.status_code == 200
        if ended.content:
            validate_message("2025-11-25", None, json_of(ended))

        after = http.post(
            url, headers=session, json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, timeout=TIMEOUT
        )
        assert after.status_code == 404
        body = json_of(after)
        validate_message("2025-11-25", "tools/list", body)
        assert "error" in body and "result" not in body


def test_get_with_an_ended_session_id_answers_404(example_server: Any) -> None:
    """Spec digest 3.7: once a session ended, requests with its id MUST get 404 (GET too)."""
    url = example_server.url
    init = requests.post(
        url,
        headers=ACCEPT,
        timeout=TIMEOUT,
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
    )
    session = {**ACCEPT, "Mcp-Session-Id": init.headers["Mcp-Session-Id"], "MCP-Protocol-Version": "2025-11-25"}
    assert requests.delete(url, headers=session, timeout=TIMEOUT).status_code == 200

    stream = requests.get(url, headers={**session, "Accept": "text/event-stream"}, timeout=TIMEOUT)

    assert stream.status_code == 404, (stream.status_code, stream.text)


# ---------------------------------------------------------------- 2026-07-28 flow


def test_stateless_discover_and_tool_call_need_no_session(example_server: Any) -> None:
    url = example_server.url
    with requests.Session() as http:
        discovered = http.post(url, headers=modern_headers("server/discover"), json=discover_body(), timeout=TIMEOUT)
        assert discovered.status_code == 200
        body = json_of(discovered)
        validate_message("2026-07-28", "server/discover", body)
        assert body["id"] == "discover-1"
        result = body["result"]
        assert "2026-07-28" in result["supportedVersions"]
        assert {"2025-11-25", "2025-06-18", "2025-03-26"} <= set(result["supportedVersions"])
        assert "tools" in result["capabilities"]
        assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "bookshop"
        assert "e2e-http" in result["instructions"]
        assert "Mcp-Session-Id" not in discovered.headers

        called = http.post(
            url,
            headers=modern_headers("tools/call", "get_book"),
            json=modern_request(7, "tools/call", name="get_book", arguments={"isbn": "9780547928227"}),
            timeout=TIMEOUT,
        )
        assert called.status_code == 200
        body = json_of(called)
        validate_message("2026-07-28", "tools/call", body)
        assert body["id"] == 7
        assert body["result"]["resultType"] == "complete"
        assert body["result"].get("isError", False) is False
        assert body["result"]["structuredContent"]["title"] == "The Hobbit"
        assert json.loads(body["result"]["content"][0]["text"]) == body["result"]["structuredContent"]
        assert "Mcp-Session-Id" not in called.headers


def test_stateless_request_ignores_a_stray_session_id_and_echoes_none(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers={**modern_headers("tools/call", "opening_hours"), "Mcp-Session-Id": "not-a-session"},
        json=modern_request(1, "tools/call", name="opening_hours", arguments={}),
        timeout=TIMEOUT,
    )

    assert response.status_code == 200
    body = json_of(response)
    validate_message("2026-07-28", "tools/call", body)
    assert "Sunday" in body["result"]["content"][0]["text"]
    assert "Mcp-Session-Id" not in response.headers


def test_stateless_unknown_method_answers_http_404_with_32601(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers=modern_headers("books/burn"),
        json=modern_request("burn-1", "books/burn"),
        timeout=TIMEOUT,
    )

    body = assert_error(response, 404, -32601)
    assert body["id"] == "burn-1"


# ---------------------------------------------------------------- DNS rebinding


def test_foreign_host_and_origin_are_refused_with_403_and_a_json_rpc_error(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers={**modern_headers("server/discover"), "Host": "evil.example.com", "Origin": "http://evil.example.com"},
        json=discover_body(),
        timeout=TIMEOUT,
    )

    body = assert_error(response, 403, -32600)
    assert "result" not in body


def test_foreign_host_alone_is_refused_with_403(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers={**modern_headers("server/discover"), "Host": "evil.example.com"},
        json=discover_body(),
        timeout=TIMEOUT,
    )

    assert_error(response, 403, -32600)


def test_foreign_origin_on_a_loopback_host_is_refused_with_403(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers={**modern_headers("server/discover"), "Origin": "http://evil.example.com"},
        json=discover_body(),
        timeout=TIMEOUT,
    )

    assert_error(response, 403, -32600)


@pytest.mark.parametrize("with_origin", [True, False], ids=["origin", "no-origin"])
@pytest.mark.parametrize("hostname", ["127.0.0.1", "localhost"])
def test_loopback_host_is_served(example_server: Any, hostname: str, with_origin: bool) -> None:
    _, port = host_of(example_server.url)
    headers = {**modern_headers("server/discover"), "Host": f"{hostname}:{port}"}
    if with_origin:
        headers["Origin"] = f"http://{hostname}:{port}"

    response = requests.post(example_server.url, headers=headers, json=discover_body(), timeout=TIMEOUT)

    assert response.status_code == 200
    validate_message("2026-07-28", "server/discover", json_of(response))


# ---------------------------------------------------------------- bodies


def test_body_over_4_mib_with_content_length_is_refused_with_413_json(example_server: Any) -> None:
    response = requests.post(
        example_server.url,
        headers=modern_headers("server/discover"),
        data=b" " * (MAX_BODY + 1),
        timeout=TIMEOUT,
    )

    assert_error(response, 413, -32600)


def test_chunked_body_over_4_mib_is_refused_with_413_json(example_server: Any) -> None:
    def chunks() -> Iterator[bytes]:
        for _ in range(5):
            yield b" " * (1024 * 1024)

    response = requests.post(
        example_server.url, headers=modern_headers("server/discover"), data=chunks(), timeout=TIMEOUT
    )

    assert_error(response, 413, -32600)


def test_chunked_body_of_a_normal_request_is_served(example_server: Any) -> None:
    payload = json.dumps(modern_request(5, "tools/call", name="search_books", arguments={"query": "orwell"})).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(payload), 17):
            yield payload[start : start + 17]

    response = requests.post(
        example_server.url, headers=modern_headers("tools/call", "search_books"), data=chunks(), timeout=TIMEOUT
    )

    assert response.request.headers.get("Transfer-Encoding") == "chunked"
    assert response.status_code == 200
    body = json_of(response)
    validate_message("2026-07-28", "tools/call", body)
    assert body["id"] == 5
    assert [b["title"] for b in body["result"]["structuredContent"]["books"]] == ["1984"]


@pytest.mark.parametrize("modern", [True, False], ids=["2026-headers", "no-version-header"])
@pytest.mark.parametrize(
    "garbage", [b"\xff\xfe{not json", b'{"jsonrpc": "2.0", "id": 1,', b""], ids=["bytes", "truncated", "empty"]
)
def test_unparseable_body_is_refused_with_400_parse_error(example_server: Any, garbage: bytes, modern: bool) -> None:
    headers = modern_headers("server/discover") if modern else ACCEPT

    response = requests.post(example_server.url, headers=headers, data=garbage, timeout=TIMEOUT)

    body = assert_error(response, 400, -32700, "2026-07-28" if modern else "2025-11-25")
    assert body.get("id") is None


def test_health_endpoint_names_the_server(example_server: Any) -> None:
    response = requests.get(example_server.url + "/health", timeout=TIMEOUT)

    assert response.status_code == 200
    assert json_of(response) == {"status": "ok", "server": "bookshop", "version": "1.0.0"}


# ---------------------------------------------------------------- concurrency


def test_twenty_parallel_tool_calls_all_succeed_with_their_own_answers(example_server: Any) -> None:
    queries = ["austen", "orwell", "tolkien", "dostoevsky", "hobbit"]
    expected_isbn = {
        "austen": "9780141439518",
        "orwell": "9780451524935",
        "tolkien": "9780547928227",
        "hobbit": "9780547928227",
        "dostoevsky": "9780140449136",
    }
    start = threading.Barrier(20, timeout=TIMEOUT)

    def call(index: int) -> tuple[int, str, requests.Response]:
        query = queries[index % len(queries)]
        with requests.Session() as http:
            start.wait()
            response = http.post(
                example_server.url,
                headers=modern_headers("tools/call", "search_books"),
                json=modern_request(f"call-{index}", "tools/call", name="search_books", arguments={"query": query}),
                timeout=TIMEOUT,
            )
            return index, query, response

    with ThreadPoolExecutor(max_workers=20) as pool:
        outcomes = list(pool.map(call, range(20)))

    assert len(outcomes) == 20
    for index, query, response in outcomes:
        assert response.status_code == 200, response.text
        body = json_of(response)
        validate_message("2026-07-28", "tools/call", body)
        assert body["id"] == f"call-{index}"
        result = body["result"]
        assert result.get("isError", False) is False
        assert result["structuredContent"]["query"] == query
        assert [b["isbn"] for b in result["structuredContent"]["books"]] == [expected_isbn[query]]
