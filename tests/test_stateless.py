"""The stateless 2026-07-28 revision: per-request ``_meta``, ``server/discover``,
standard headers and its error codes (spec digest sections 2.2, 3.9, 3.10, 3.13)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Annotated, Any

import pytest
from flask import Flask

from flask_mcp import MCP, Context, Header
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

V = "2026-07-28"
ALL_NEWEST_FIRST = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
PV = "io.modelcontextprotocol/protocolVersion"
CAPS = "io.modelcontextprotocol/clientCapabilities"
INFO = "io.modelcontextprotocol/clientInfo"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


@pytest.fixture
def app(app: Flask) -> Flask:
    mcp = MCP(app, name="stateless-server", version="2.0.0")

    @mcp.tool
    def echo(text: str) -> str:
        """Say it back."""
        return text

    @mcp.tool
    def needs_sampling(ctx: Context) -> str:
        """Only works for clients that can sample."""
        ctx.require_client_capability(sampling={})
        return "sampled"

    @mcp.tool
    def regional(
        region: Annotated[str, Header("Region")],
        count: Annotated[int, Header("Count")] = 1,
        verbose: Annotated[bool, Header("Verbose")] = False,
    ) -> str:
        """Report a region."""
        return f"{region}:{count}:{verbose}"

    return app


@pytest.fixture
def client(make_client: MakeClient, app: Flask) -> MCPTestClient:
    return make_client(app)


def meta(version: str = V, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {PV: version, CAPS: {}, INFO: {"name": "raw", "version": "0"}}
    base.update(extra)
    return base


def send(
    client: MCPTestClient,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    id: int | str = "r-1",
    headers: dict[str, str] | None = None,
    drop: tuple[str, ...] = (),
    meta_value: Any = "default",
) -> Any:
    """POST one 2026 request with full control over ``_meta`` and headers."""
    params = dict(params or {})
    if meta_value == "default":
        params["_meta"] = meta()
    elif meta_value is not None:
        params["_meta"] = meta_value
    all_headers = {"MCP-Protocol-Version": V, "Mcp-Method": method}
    if method == "tools/call" and isinstance(params.get("name"), str):
        all_headers["Mcp-Name"] = params["name"]
    all_headers.update(headers or {})
    for name in drop:
        all_headers.pop(name, None)
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    return client.post(body, headers=all_headers)


def assert_error(response: Any, status: int, code: int, id: Any = "r-1") -> dict[str, Any]:
    assert response.status_code == status, response.http.data
    assert response.http.mimetype == "application/json"
    message = response.message
    assert message["id"] == id
    assert message["error"]["code"] == code
    return message["error"]  # type: ignore[no-any-return]


# ---------------------------------------------------------------------- server/discover


def test_discover_lists_every_supported_version_newest_first(client: MCPTestClient) -> None:
    result = client.discover().result
    assert result["supportedVersions"] == ALL_NEWEST_FIRST


def test_discover_result_is_complete_and_cacheable(client: MCPTestClient) -> None:
    result = client.discover().result
    assert result["resultType"] == "complete"
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


def test_discover_announces_the_tools_capability(client: MCPTestClient) -> None:
    assert "tools" in client.discover().result["capabilities"]


def test_discover_carries_server_info_in_meta(client: MCPTestClient) -> None:
    info = client.discover().result["_meta"][SERVER_INFO]
    assert info["name"] == "stateless-server"
    assert info["version"] == "2.0.0"


def test_every_2026_result_carries_result_type_and_server_info(client: MCPTestClient) -> None:
    client.list_tools()
    for response in (client.list_tools(), client.call_tool("echo", {"text": "x"})):
        result = response.result
        assert result["resultType"] == "complete"
        assert result["_meta"][SERVER_INFO]["name"] == "stateless-server"


def test_tools_list_carries_cache_hints(client: MCPTestClient) -> None:
    result = client.list_tools().result
    assert isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0
    assert result["cacheScope"] in ("public", "private")


def test_discover_answer_is_the_same_for_every_client(make_client: MakeClient, app: Flask) -> None:
    first = make_client(app, client_info={"name": "a", "version": "1"}).discover().result
    second = (
        make_client(app, client_info={"name": "b", "version": "9"}, capabilities={"sampling": {}}).discover().result
    )
    assert first == second


# ---------------------------------------------------------------------- required _meta keys


@pytest.mark.parametrize("id", ["r-1", 0, 42])
def test_missing_meta_is_invalid_params_with_http_400(client: MCPTestClient, id: Any) -> None:
    response = send(client, "tools/list", id=id, meta_value=None)
    assert_error(response, 400, -32602, id=id)


def test_meta_that_is_not_an_object_is_invalid_params(client: MCPTestClient) -> None:
    response = send(client, "tools/list", meta_value="2026-07-28")
    assert_error(response, 400, -32602)


def test_missing_protocol_version_in_meta_is_invalid_params(client: MCPTestClient) -> None:
    value = meta()
    del value[PV]
    assert_error(send(client, "tools/list", meta_value=value), 400, -32602)


def test_missing_client_capabilities_in_meta_is_invalid_params(client: MCPTestClient) -> None:
    value = meta()
    del value[CAPS]
    assert_error(send(client, "server/discover", meta_value=value), 400, -32602)


def test_client_capabilities_that_are_not_an_object_are_invalid_params(client: MCPTestClient) -> None:
    assert_error(send(client, "tools/list", meta_value=meta(V, **{CAPS: ["sampling"]})), 400, -32602)


def test_request_without_client_info_is_still_served(client: MCPTestClient) -> None:
    value = meta()
    del value[INFO]
    response = send(client, "tools/list", meta_value=value)
    assert response.status_code == 200
    assert {tool["name"] for tool in response.result["tools"]} == {"echo", "needs_sampling", "regional"}


# ---------------------------------------------------------------------- protocol version


def test_unsupported_version_is_32022_with_supported_and_requested(client: MCPTestClient) -> None:
    supported = client.discover().result["supportedVersions"]
    response = send(client, "tools/list", headers={"MCP-Protocol-Version": "v999.0.0"}, meta_value=meta("v999.0.0"))
    error = assert_error(response, 400, -32022)
    assert error["data"]["requested"] == "v999.0.0"
    offered = error["data"]["supported"]
    assert isinstance(offered, list) and offered
    assert set(offered) <= set(supported)
    assert "2026-07-28" in offered


def test_header_differing_from_meta_version_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(client, "tools/list", headers={"MCP-Protocol-Version": "2025-11-25"})
    assert_error(response, 400, -32020)


def test_meta_version_differing_from_header_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(client, "tools/list", meta_value=meta("2025-06-18"))
    assert_error(response, 400, -32020)


def test_missing_protocol_version_header_with_2026_meta_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(client, "tools/list", drop=("MCP-Protocol-Version",))
    assert_error(response, 400, -32020)


# ---------------------------------------------------------------------- Mcp-Method / Mcp-Name


def test_missing_mcp_method_is_header_mismatch(client: MCPTestClient) -> None:
    assert_error(send(client, "tools/list", drop=("Mcp-Method",)), 400, -32020)


def test_mismatched_mcp_method_is_header_mismatch(client: MCPTestClient) -> None:
    assert_error(send(client, "tools/list", headers={"Mcp-Method": "server/discover"}), 400, -32020)


def test_mcp_method_in_the_wrong_case_is_header_mismatch(client: MCPTestClient) -> None:
    assert_error(send(client, "tools/list", headers={"Mcp-Method": "TOOLS/LIST"}), 400, -32020)


def test_missing_mcp_name_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(client, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, drop=("Mcp-Name",))
    assert_error(response, 400, -32020)


def test_mismatched_mcp_name_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(
        client, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers={"Mcp-Name": "regional"}
    )
    assert_error(response, 400, -32020)


def test_mcp_name_in_the_wrong_case_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(client, "tools/call", {"name": "echo", "arguments": {"text": "x"}}, headers={"Mcp-Name": "ECHO"})
    assert_error(response, 400, -32020)


def test_whitespace_around_header_values_is_accepted(client: MCPTestClient) -> None:
    response = send(
        client,
        "tools/call",
        {"name": "echo", "arguments": {"text": "x"}},
        headers={"Mcp-Name": "  echo ", "Mcp-Method": " tools/call  ", "MCP-Protocol-Version": " 2026-07-28 "},
    )
    assert response.status_code == 200
    assert response.result["content"] == [{"type": "text", "text": "x"}]


def test_header_names_are_case_insensitive(client: MCPTestClient) -> None:
    params = {"name": "echo", "arguments": {"text": "y"}, "_meta": meta()}
    headers = {"mcp-protocol-version": V, "MCP-METHOD": "tools/call", "mcp-name": "echo"}
    response = client.post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}, headers=headers)
    assert response.status_code == 200
    assert response.result["content"][0]["text"] == "y"


def test_base64_encoded_mcp_name_is_accepted(client: MCPTestClient) -> None:
    encoded = "=?base64?" + base64.b64encode(b"echo").decode() + "?="
    response = send(client, "tools/call", {"name": "echo", "arguments": {"text": "z"}}, headers={"Mcp-Name": encoded})
    assert response.status_code == 200


def test_invalid_base64_mcp_name_is_header_mismatch(client: MCPTestClient) -> None:
    response = send(
        client, "tools/call", {"name": "echo", "arguments": {"text": "z"}}, headers={"Mcp-Name": "=?base64?ZWNobw?="}
    )
    assert_error(response, 400, -32020)


# ---------------------------------------------------------------------- removed and unknown methods


@pytest.mark.parametrize(
    "method,params",
    [
        ("initialize", {"protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}),
        ("ping", {}),
        ("logging/setLevel", {"level": "info"}),
        ("resources/subscribe", {"uri": "file:///x"}),
        ("no/such/method", {}),
    ],
)
def test_removed_and_unknown_methods_are_http_404_method_not_found(
    client: MCPTestClient, method: str, params: dict[str, Any]
) -> None:
    response = client.request(method, params, id="gone")
    assert_error(response, 404, -32601, id="gone")


# ---------------------------------------------------------------------- client capabilities


def test_tool_needing_an_undeclared_capability_is_32021(client: MCPTestClient) -> None:
    response = client.call_tool("needs_sampling", {}, id="cap")
    error = assert_error(response, 400, -32021, id="cap")
    assert error["data"]["requiredCapabilities"] == {"sampling": {}}


def test_tool_needing_a_declared_capability_is_served(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, capabilities={"sampling": {}})
    response = client.call_tool("needs_sampling", {})
    assert response.status_code == 200
    assert response.result["content"] == [{"type": "text", "text": "sampled"}]


def test_capabilities_are_judged_per_request_not_remembered(make_client: MakeClient, app: Flask) -> None:
    able = make_client(app, capabilities={"sampling": {}})
    assert able.call_tool("needs_sampling", {}).status_code == 200
    unable = make_client(app)
    assert unable.call_tool("needs_sampling", {}).status_code == 400


def test_same_tool_on_a_legacy_session_gives_an_is_error_result(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    client.initialize()
    response = client.call_tool("needs_sampling", {})
    assert response.status_code == 200
    result = response.result
    assert result["isError"] is True
    assert "sampling" in result["content"][0]["text"]


# ---------------------------------------------------------------------- Mcp-Param-*


def regional_call(client: MCPTestClient, arguments: dict[str, Any], headers: dict[str, str]) -> Any:
    return send(client, "tools/call", {"name": "regional", "arguments": arguments}, headers=headers)


def test_tools_list_shows_x_mcp_header_on_the_annotated_property(client: MCPTestClient) -> None:
    tools = {tool["name"]: tool for tool in client.list_tools().result["tools"]}
    properties = tools["regional"]["inputSchema"]["properties"]
    assert properties["region"]["x-mcp-header"] == "Region"
    assert properties["count"]["x-mcp-header"] == "Count"
    assert properties["verbose"]["x-mcp-header"] == "Verbose"
    assert "x-mcp-header" not in tools["echo"]["inputSchema"]["properties"]["text"]


def test_client_mirroring_param_headers_is_served(client: MCPTestClient) -> None:
    client.list_tools()
    response = client.call_tool("regional", {"region": "eu-west", "count": 3, "verbose": True})
    assert response.status_code == 200
    assert response.result["content"][0]["text"] == "eu-west:3:True"


def test_missing_param_header_is_header_mismatch(client: MCPTestClient) -> None:
    assert_error(regional_call(client, {"region": "eu-west"}, {}), 400, -32020)


def test_mismatched_param_header_is_header_mismatch(client: MCPTestClient) -> None:
    response = regional_call(client, {"region": "eu-west"}, {"Mcp-Param-Region": "us-east"})
    assert_error(response, 400, -32020)


def test_param_header_value_is_case_sensitive(client: MCPTestClient) -> None:
    response = regional_call(client, {"region": "eu-west"}, {"Mcp-Param-Region": "EU-WEST"})
    assert_error(response, 400, -32020)


def test_param_header_name_is_case_insensitive(client: MCPTestClient) -> None:
    response = regional_call(client, {"region": "eu-west"}, {"mcp-param-region": "eu-west"})
    assert response.status_code == 200


def test_absent_optional_arguments_need_no_param_header(client: MCPTestClient) -> None:
    response = regional_call(client, {"region": "eu"}, {"Mcp-Param-Region": "eu"})
    assert response.status_code == 200
    assert response.result["content"][0]["text"] == "eu:1:False"


def test_integer_param_header_compares_numerically(client: MCPTestClient) -> None:
    response = regional_call(
        client, {"region": "eu", "count": 42}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "42.0"}
    )
    assert response.status_code == 200
    wrong = regional_call(client, {"region": "eu", "count": 42}, {"Mcp-Param-Region": "eu", "Mcp-Param-Count": "41"})
    assert_error(wrong, 400, -32020)


def test_boolean_param_header_is_true_or_false(client: MCPTestClient) -> None:
    ok = regional_call(
        client, {"region": "eu", "verbose": False}, {"Mcp-Param-Region": "eu", "Mcp-Param-Verbose": "false"}
    )
    assert ok.status_code == 200
    bad = regional_call(
        client, {"region": "eu", "verbose": True}, {"Mcp-Param-Region": "eu", "Mcp-Param-Verbose": "True"}
    )
    assert_error(bad, 400, -32020)


def test_non_ascii_param_value_travels_in_base64(client: MCPTestClient) -> None:
    client.list_tools()
    response = client.call_tool("regional", {"region": "Zürich"})
    assert response.status_code == 200
    assert response.result["content"][0]["text"] == "Zürich:1:False"


def test_raw_base64_param_header_is_decoded(client: MCPTestClient) -> None:
    encoded = "=?base64?" + base64.b64encode("Zürich".encode()).decode() + "?="
    response = regional_call(client, {"region": "Zürich"}, {"Mcp-Param-Region": encoded})
    assert response.status_code == 200


def test_invalid_base64_param_header_is_header_mismatch(client: MCPTestClient) -> None:
    response = regional_call(client, {"region": "Hello"}, {"Mcp-Param-Region": "=?base64?SGVsbG8?="})
    assert_error(response, 400, -32020)


def test_param_headers_are_not_required_on_legacy_sessions(make_client: MakeClient, app: Flask) -> None:
    client = make_client(app, "2025-11-25")
    client.initialize()
    response = client.call_tool("regional", {"region": "eu-west", "count": 2})
    assert response.status_code == 200
    assert response.result["content"][0]["text"] == "eu-west:2:False"


# ---------------------------------------------------------------------- notifications and responses


def test_notification_on_2026_gets_202(client: MCPTestClient) -> None:
    body = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"_meta": meta(), "requestId": 1}}
    response = client.post(body, headers={"MCP-Protocol-Version": V, "Mcp-Method": "notifications/cancelled"})
    assert response.status_code == 202
    assert response.http.data == b""


def test_jsonrpc_response_on_2026_is_rejected_with_400(client: MCPTestClient) -> None:
    response = client.post({"jsonrpc": "2.0", "id": 3, "result": {}}, headers={"MCP-Protocol-Version": V})
    assert response.status_code == 400
    assert "error" in response.message
    assert response.message["error"]["code"] in (-32600, -32602)


def test_stateless_requests_need_no_prior_handshake(client: MCPTestClient) -> None:
    response = client.call_tool("echo", {"text": "first"})
    assert response.status_code == 200
    assert response.result["content"] == [{"type": "text", "text": "first"}]


# ---------------------------------------------------------------------- optional _meta keys


def test_unknown_log_level_in_meta_is_invalid_params(client: MCPTestClient) -> None:
    value = meta(**{"io.modelcontextprotocol/logLevel": "loud"})
    assert_error(send(client, "tools/list", meta_value=value), 400, -32602)


def test_valid_log_level_in_meta_is_served(client: MCPTestClient) -> None:
    value = meta(**{"io.modelcontextprotocol/logLevel": "warning"})
    assert send(client, "tools/list", meta_value=value).status_code == 200
