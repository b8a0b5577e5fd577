"""Initialize-based lifecycle, sessions, version headers and batches over HTTP
(spec digest sections 1, 2.1, 3.7-3.9, 3.11, 3.13)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import FakeClock
from flask import Flask

from flask_mcp import MCP
from flask_mcp.testing import MCPTestClient

LEGACY = ("2025-11-25", "2025-06-18", "2025-03-26")
SESSION_ID = re.compile(r"^[\x21-\x7E]+$")
BAD_VERSION_HEADERS = ("invalid-protocol-version", "2000-01-01", "2099-01-01")

MakeClient = Callable[..., MCPTestClient]


@pytest.fixture
def app() -> Flask:
    app = Flask("lifecycle")
    mcp = MCP(app, name="lifecycle-server", version="1.2.3")

    @mcp.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    return app


def initialized(make_client: MakeClient, app: Flask, version: str) -> MCPTestClient:
    client = make_client(app, version)
    client.initialize()
    assert client.session_id
    return client


def initialize_message(version: Any, id: int | str = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    }


def session_headers(client: MCPTestClient, version: str | None = None) -> dict[str, str]:
    headers = {"Mcp-Session-Id": client.session_id or ""}
    if version is not None:
        headers["MCP-Protocol-Version"] = version
    return headers


def rpc(method: str, id: int | str = 1, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return message


# ---------------------------------------------------------------------- initialize


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_answers_with_the_requested_legacy_version(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = make_client(app, version)
    response = client.initialize()
    assert response.status_code == 200
    result = response.result
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "lifecycle-server"
    assert result["serverInfo"]["version"] == "1.2.3"
    assert "tools" in result["capabilities"]


@pytest.mark.parametrize("version", LEGACY)
def test_initialize_mints_a_visible_ascii_session_id(make_client: MakeClient, app: Flask, version: str) -> None:
    response = make_client(app, version).initialize()
    session_id = response.headers.get("Mcp-Session-Id")
    assert session_id
    assert SESSION_ID.match(session_id)


def test_each_initialize_mints_a_different_session_id(make_client: MakeClient, app: Flask) -> None:
    ids = {make_client(app, "2025-11-25").initialize().headers["Mcp-Session-Id"] for _ in range(5)}
    assert len(ids) == 5


def test_session_ids_sort_in_the_order_they_were_minted(make_client: MakeClient, app: Flask) -> None:
    """The store's index takes new sessions on its last page (see new_session_id);
    what follows the 12-hex-digit millisecond prefix is 32 urlsafe characters,
    192 random bits."""
    ids = []
    for _ in range(3):
        ids.append(make_client(app, "2025-11-25").initialize().headers["Mcp-Session-Id"])
        time.sleep(0.002)  # the next id falls in a later millisecond
    assert ids == sorted(ids)
    for session_id in ids:
        assert re.fullmatch(r"[0-9a-f]{12}[A-Za-z0-9_-]{32}", session_id)
        assert abs(int(session_id[:12], 16) / 1000 - time.time()) < 60
    assert len({session_id[12:] for session_id in ids}) == 3


@pytest.mark.parametrize("requested", ["1999-01-01", "2024-11-05", "2099-01-01", "not-a-version"])
def test_initialize_with_an_unknown_version_counter_offers_2025_11_25(
    make_client: MakeClient, app: Flask, requested: str
) -> None:
    client = make_client(app, "2025-11-25")
    response = client.post(initialize_message(requested))
    assert response.status_code == 200
    assert response.result["protocolVersion"] == "2025-11-25"
    assert SESSION_ID.match(response.headers["Mcp-Session-Id"])


def test_initialize_asking_for_2026_07_28_counter_offers_2025_11_25(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    response = client.post(initialize_message("2026-07-28"))
    assert response.status_code == 200
    assert response.result["protocolVersion"] == "2025-11-25"
    assert "Mcp-Session-Id" in response.headers


def test_counter_offered_session_works_at_the_offered_version(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    session_id = client.post(initialize_message("1999-01-01")).headers["Mcp-Session-Id"]
    client.session_id = session_id
    response = client.post(
        rpc("tools/list"), headers={"Mcp-Session-Id": session_id, "MCP-Protocol-Version": "2025-11-25"}
    )
    assert response.status_code == 200
    assert [tool["name"] for tool in response.result["tools"]] == ["echo"]


def test_initialize_without_protocol_version_is_invalid_params(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    message = initialize_message("x", id=9)
    del message["params"]["protocolVersion"]
    response = client.post(message)
    assert response.error["code"] == -32602
    assert response.message["id"] == 9
    assert "Mcp-Session-Id" not in response.headers


# ---------------------------------------------------------------------- no sessions on 2026


def test_2026_requests_never_get_a_session_id(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app)
    for response in (client.discover(), client.list_tools(), client.call_tool("echo", {"text": "x"})):
        assert response.status_code == 200
        assert "Mcp-Session-Id" not in response.headers


def test_2026_requests_ignore_and_never_echo_a_session_id(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app)
    response = client.request("tools/list", headers={"Mcp-Session-Id": "no-such-session"})
    assert response.status_code == 200
    assert "Mcp-Session-Id" not in response.headers


def test_2026_request_with_a_live_legacy_session_id_does_not_echo_it(make_client: MakeClient, app: Flask) -> None:
    legacy = initialized(make_client, app, "2025-11-25")
    modern = make_client(app)
    response = modern.request("tools/list", headers={"Mcp-Session-Id": legacy.session_id or ""})
    assert response.status_code == 200
    assert "Mcp-Session-Id" not in response.headers


# ---------------------------------------------------------------------- notifications and responses


@pytest.mark.parametrize("version", LEGACY)
def test_initialized_notification_gets_202_with_an_empty_body(
    make_client: MakeClient, app: Flask, version: str
) -> None:
    client = make_client(app, version)
    response = client.request(
        "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}
    )
    client.session_id = response.headers["Mcp-Session-Id"]
    client.negotiated_version = version
    answer = client.notify("notifications/initialized")
    assert answer.status_code == 202
    assert answer.http.data == b""


@pytest.mark.parametrize("version", LEGACY)
def test_client_response_on_a_legacy_session_gets_202(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    headers = client.standard_headers("", {})
    for body in (
        {"jsonrpc": "2.0", "id": "server-1", "result": {}},
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "no"}},
    ):
        answer = client.post(body, headers=headers)
        assert answer.status_code == 202
        assert answer.http.data == b""


def test_other_notifications_on_a_legacy_session_get_202(make_client: MakeClient, app: Flask) -> None:
    client = initialized(make_client, app, "2025-11-25")
    answer = client.notify("notifications/cancelled", {"requestId": 77, "reason": "gone"})
    assert answer.status_code == 202
    assert answer.http.data == b""


# ---------------------------------------------------------------------- sessions


@pytest.mark.parametrize("version_header", [None, "2025-11-25", "2025-03-26"])
def test_missing_session_returns_400(make_client: MakeClient, app: Flask, version_header: str | None) -> None:
    client = make_client(app, "2025-11-25")
    headers = {"MCP-Protocol-Version": version_header} if version_header else {}
    response = client.post(rpc("tools/list", id=3), headers=headers)
    assert response.status_code == 400
    assert "error" in response.message


def test_unknown_session_returns_404(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    response = client.post(
        rpc("tools/list"), headers={"Mcp-Session-Id": "does-not-exist", "MCP-Protocol-Version": "2025-11-25"}
    )
    assert response.status_code == 404
    assert "error" in response.message


def test_unknown_session_without_version_header_returns_404(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-03-26")
    response = client.post(rpc("ping"), headers={"Mcp-Session-Id": "does-not-exist"})
    assert response.status_code == 404


@pytest.mark.parametrize("version", LEGACY)
def test_requests_on_a_live_session_are_served(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    response = client.call_tool("echo", {"text": "hi"})
    assert response.status_code == 200
    assert response.result["content"] == [{"type": "text", "text": "hi"}]


@pytest.mark.parametrize("version", LEGACY)
def test_delete_ends_a_session_and_later_requests_get_404(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    assert client.list_tools().status_code == 200
    ended = client.delete()
    assert 200 <= ended.status_code < 300
    after = client.request("tools/list")
    assert after.status_code == 404


def test_deleting_an_ended_session_again_returns_404(make_client: MakeClient, app: Flask) -> None:
    client = initialized(make_client, app, "2025-11-25")
    assert client.delete().status_code < 300
    assert client.delete().status_code == 404


def test_delete_of_an_unknown_session_returns_404(make_client: MakeClient, app: Flask) -> None:
    response = app.test_client().delete("/mcp", headers={"Mcp-Session-Id": "never-existed"})
    assert response.status_code == 404
    assert response.mimetype == "application/json"


def test_deleting_one_session_leaves_others_alive(make_client: MakeClient, app: Flask) -> None:
    first = initialized(make_client, app, "2025-11-25")
    second = initialized(make_client, app, "2025-11-25")
    first.delete()
    assert second.list_tools().status_code == 200
    assert first.request("tools/list").status_code == 404


# ---------------------------------------------------------------------- MCP-Protocol-Version header


@pytest.mark.parametrize("value", BAD_VERSION_HEADERS)
def test_bad_protocol_version_header_without_session_returns_400(
    make_client: MakeClient, app: Flask, value: str
) -> None:
    client = make_client(app, "2025-11-25")
    response = client.post(rpc("tools/list", id=2), headers={"MCP-Protocol-Version": value})
    assert response.status_code == 400
    assert "error" in response.message


@pytest.mark.parametrize("value", BAD_VERSION_HEADERS)
@pytest.mark.parametrize("version", LEGACY)
def test_bad_protocol_version_header_with_a_valid_session_returns_400(
    make_client: MakeClient, app: Flask, version: str, value: str
) -> None:
    client = initialized(make_client, app, version)
    response = client.post(rpc("tools/list", id=2), headers=session_headers(client, value))
    assert response.status_code == 400
    assert response.message.get("id") in (2, None)
    assert "error" in response.message


@pytest.mark.parametrize("value", BAD_VERSION_HEADERS)
def test_bad_protocol_version_header_with_an_unknown_session_returns_400(
    make_client: MakeClient, app: Flask, value: str
) -> None:
    client = make_client(app, "2025-11-25")
    response = client.post(rpc("tools/list"), headers={"Mcp-Session-Id": "nope", "MCP-Protocol-Version": value})
    assert response.status_code == 400


@pytest.mark.parametrize(
    "negotiated,header",
    [
        ("2025-11-25", "2025-06-18"),
        ("2025-11-25", "2025-03-26"),
        ("2025-06-18", "2025-11-25"),
        ("2025-03-26", "2025-06-18"),
    ],
)
def test_header_differing_from_the_negotiated_version_returns_400(
    make_client: MakeClient, app: Flask, negotiated: str, header: str
) -> None:
    client = initialized(make_client, app, negotiated)
    response = client.post(rpc("tools/list"), headers=session_headers(client, header))
    assert response.status_code == 400


@pytest.mark.parametrize("version", LEGACY)
def test_header_equal_to_the_negotiated_version_is_served(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    response = client.post(rpc("tools/list"), headers=session_headers(client, version))
    assert response.status_code == 200
    assert response.result["tools"][0]["name"] == "echo"


def test_missing_header_on_a_session_is_served_at_the_negotiated_version(make_client: MakeClient, app: Flask) -> None:
    client = initialized(make_client, app, "2025-06-18")
    response = client.post(rpc("tools/list"), headers=session_headers(client))
    assert response.status_code == 200
    assert "tools" in response.result


# ---------------------------------------------------------------------- ping, logging, unknown methods


@pytest.mark.parametrize("version", LEGACY)
def test_ping_returns_an_empty_result(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    response = client.request("ping")
    assert response.status_code == 200
    assert response.result == {}


def test_ping_keeps_request_id_zero(make_client: MakeClient, app: Flask) -> None:
    client = initialized(make_client, app, "2025-11-25")
    response = client.request("ping", id=0)
    assert response.message["id"] == 0
    assert response.result == {}


@pytest.mark.parametrize("level", ["debug", "info", "warning", "emergency"])
def test_logging_set_level_with_a_valid_level_returns_an_empty_result(
    make_client: MakeClient, app: Flask, level: str
) -> None:
    client = initialized(make_client, app, "2025-11-25")
    response = client.request("logging/setLevel", {"level": level})
    assert response.status_code == 200
    assert response.result == {}


@pytest.mark.parametrize("params", [{"level": "loud"}, {"level": "INFO"}, {}, {"level": 3}])
@pytest.mark.parametrize("version", LEGACY)
def test_logging_set_level_with_an_invalid_level_is_invalid_params(
    make_client: MakeClient, app: Flask, version: str, params: dict[str, Any]
) -> None:
    client = initialized(make_client, app, version)
    response = client.request("logging/setLevel", params)
    assert response.error["code"] == -32602


@pytest.mark.parametrize("method", ["no/such/method", "server/discover", "resources/templates/nope"])
@pytest.mark.parametrize("version", LEGACY)
def test_unknown_method_on_legacy_is_http_200_with_method_not_found(
    make_client: MakeClient, app: Flask, version: str, method: str
) -> None:
    client = initialized(make_client, app, version)
    response = client.request(method, id="m-1")
    assert response.status_code == 200
    assert response.status_code != 404
    assert response.error["code"] == -32601
    assert response.message["id"] == "m-1"


def test_initialize_inside_an_established_session_creates_a_new_session(make_client: MakeClient, app: Flask) -> None:
    client = initialized(make_client, app, "2025-11-25")
    response = client.post(initialize_message("2025-06-18"), headers=session_headers(client))
    assert response.status_code == 200
    assert response.result["protocolVersion"] == "2025-06-18"
    assert response.headers["Mcp-Session-Id"] != client.session_id


# ---------------------------------------------------------------------- batches (2025-03-26 only)


def batch_client(make_client: MakeClient, app: Flask) -> MCPTestClient:
    return initialized(make_client, app, "2025-03-26")


@pytest.mark.parametrize("version_header", [None, "2025-03-26"])
def test_batch_on_a_2025_03_26_session_returns_a_json_array(
    make_client: MakeClient, app: Flask, version_header: str | None
) -> None:
    client = batch_client(make_client, app)
    batch = [
        rpc("ping", id=1),
        rpc("tools/call", id="two", params={"name": "echo", "arguments": {"text": "b"}}),
        rpc("tools/list", id=0),
    ]
    response = client.post(batch, headers=session_headers(client, version_header))
    assert response.status_code == 200
    assert response.http.mimetype == "application/json"
    body = response.http.get_json()
    assert isinstance(body, list)
    by_id = {item["id"]: item for item in body}
    assert set(by_id) == {1, "two", 0}
    assert by_id[1]["result"] == {}
    assert by_id["two"]["result"]["content"] == [{"type": "text", "text": "b"}]
    assert by_id[0]["result"]["tools"][0]["name"] == "echo"


def test_batch_answers_only_the_requests_not_the_notifications(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    batch = [rpc("ping", id=5), {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}]
    response = client.post(batch, headers=session_headers(client))
    body = response.http.get_json()
    assert isinstance(body, list)
    assert [item["id"] for item in body] == [5]


def test_all_notification_batch_returns_202(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    ]
    response = client.post(batch, headers=session_headers(client))
    assert response.status_code == 202
    assert response.http.data == b""


def test_all_response_batch_returns_202(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    batch = [{"jsonrpc": "2.0", "id": "s1", "result": {}}, {"jsonrpc": "2.0", "id": "s2", "result": {"roots": []}}]
    response = client.post(batch, headers=session_headers(client))
    assert response.status_code == 202
    assert response.http.data == b""


def test_empty_batch_returns_400(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    response = client.post([], headers=session_headers(client))
    assert response.status_code == 400
    assert "error" in response.message


def test_initialize_inside_a_batch_is_answered_with_an_error_element(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    batch = [initialize_message("2025-03-26", id="init"), rpc("ping", id="p")]
    response = client.post(batch, headers=session_headers(client))
    body = response.http.get_json()
    assert isinstance(body, list)
    by_id = {item["id"]: item for item in body}
    assert "error" in by_id["init"]
    assert "result" not in by_id["init"]
    assert by_id["p"]["result"] == {}
    assert "Mcp-Session-Id" not in response.headers or response.headers["Mcp-Session-Id"] == client.session_id


def test_invalid_element_in_a_batch_gets_its_own_error(make_client: MakeClient, app: Flask) -> None:
    client = batch_client(make_client, app)
    batch = [{"jsonrpc": "2.0", "id": 4, "method": "ping", "params": [1]}, rpc("ping", id=6)]
    response = client.post(batch, headers=session_headers(client))
    body = response.http.get_json()
    by_id = {item.get("id"): item for item in body}
    assert by_id[4]["error"]["code"] == -32600
    assert by_id[6]["result"] == {}


def test_batch_without_a_session_returns_400(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-03-26")
    response = client.post([rpc("ping")])
    assert response.status_code == 400


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batch_is_rejected_with_one_error_after_2025_03_26(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    response = client.post([rpc("ping", id=1), rpc("tools/list", id=2)], headers=session_headers(client, version))
    assert response.status_code == 400
    body = response.http.get_json()
    assert isinstance(body, dict)
    assert body["error"]["code"] == -32600


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_batch_without_header_on_a_newer_session_is_rejected(make_client: MakeClient, app: Flask, version: str) -> None:
    client = initialized(make_client, app, version)
    response = client.post([rpc("ping", id=1)], headers=session_headers(client))
    assert response.status_code == 400
    body = response.http.get_json()
    assert isinstance(body, dict)
    assert body["error"]["code"] == -32600


def test_batch_claiming_2025_03_26_on_a_2025_11_25_session_is_rejected(make_client: MakeClient, app: Flask) -> None:
    """The header must agree with the negotiated version (spec digest 10, rec: 400)."""
    client = initialized(make_client, app, "2025-11-25")
    response = client.post([rpc("ping", id=1)], headers=session_headers(client, "2025-03-26"))
    assert response.status_code == 400


def test_batch_on_a_2025_03_26_session_naming_another_version_is_rejected(make_client: MakeClient, app: Flask) -> None:
    """As for a single request: the header names the session's version or none."""
    client = batch_client(make_client, app)
    response = client.post([rpc("ping", id=1)], headers=session_headers(client, "2025-11-25"))
    assert response.status_code == 400
    body = response.http.get_json()
    assert isinstance(body, dict)
    assert body["error"]["code"] == -32600
    assert "differs from the version negotiated for this session (2025-03-26)" in body["error"]["message"]


def test_batch_is_rejected_with_one_error_for_2026_07_28(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app)
    meta = client.request_meta()
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
        {"jsonrpc": "2.0", "id": 2, "method": "server/discover", "params": {"_meta": meta}},
    ]
    response = client.post(batch, headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    assert response.status_code == 400
    body = response.http.get_json()
    assert isinstance(body, dict)
    assert body["error"]["code"] == -32600


# ---------------------------------------------------------------------- idle expiry


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def expiring_app(clock: FakeClock) -> Flask:
    from flask_mcp.backends import MemorySessionStore

    app = Flask("expiring")
    app.config["MCP_BACKEND"] = MemorySessionStore(timeout=60, clock=clock)
    MCP(app)
    return app


def test_session_idle_past_its_timeout_returns_404(
    make_client: MakeClient, expiring_app: Flask, clock: FakeClock
) -> None:
    client = initialized(make_client, expiring_app, "2025-11-25")
    clock.now += 61
    assert client.request("ping").status_code == 404


def test_activity_keeps_a_session_alive(make_client: MakeClient, expiring_app: Flask, clock: FakeClock) -> None:
    client = initialized(make_client, expiring_app, "2025-11-25")
    for _ in range(3):
        clock.now += 45
        assert client.request("ping").status_code == 200
    clock.now += 61
    assert client.request("ping").status_code == 404
