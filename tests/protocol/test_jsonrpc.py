"""JSON-RPC 2.0 framing: parse, classify, serialize (spec digest section 4)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from flask_mcp.protocol import jsonrpc
from flask_mcp.protocol.errors import ErrorCode, InvalidParams, InvalidRequest, MCPError, ParseError
from flask_mcp.protocol.jsonrpc import ClientResponse, Notification, Request

# ---------------------------------------------------------------------- parse_body


def test_parse_body_decodes_a_json_object() -> None:
    assert jsonrpc.parse_body(b'{"jsonrpc":"2.0","id":1,"method":"ping"}') == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "ping",
    }


def test_parse_body_decodes_a_json_array_for_batches() -> None:
    assert jsonrpc.parse_body(b'[{"a":1},{"b":2}]') == [{"a": 1}, {"b": 2}]


@pytest.mark.parametrize("number", [2**63, 2**64 + 1, -(2**70), 10**30])
def test_parse_body_keeps_integers_beyond_64_bits_exact(number: int) -> None:
    payload = jsonrpc.parse_body(b'{"id": 1, "params": {"n": %d}}' % number)
    assert payload["params"]["n"] == number
    assert isinstance(payload["params"]["n"], int)


@pytest.mark.parametrize(
    "body, expected",
    [(b'\xef\xbb\xbf{"a": 1}', {"a": 1}), (b'{"a": "\\ud800"}', {"a": "\ud800"})],
    ids=["utf-8-bom", "escaped-lone-surrogate"],
)
def test_parse_body_reads_what_the_stdlib_reads(body: bytes, expected: Any) -> None:
    assert jsonrpc.parse_body(body) == expected


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"])
def test_json_in_another_unicode_encoding_is_a_parse_error(encoding: str) -> None:
    body = '{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"a": "\u00e9"}}'.encode(encoding)

    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)

    assert info.value.code == -32700


@pytest.mark.parametrize("raw", [b"\xed\xa0\x80", b"\xed\xb0\x80", b"\xe9", b"\xc0\xaf"],
                         ids=["lone-high-surrogate", "lone-low-surrogate", "latin-1", "overlong"])
def test_bytes_that_are_not_utf8_are_a_parse_error(raw: bytes) -> None:
    body = b'{"jsonrpc": "2.0", "id": "id-' + raw + b'", "method": "ping"}'

    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)

    assert "UTF-8" in info.value.message


@pytest.mark.parametrize("depth", [65, 1_000, 5_000])
def test_too_deep_json_is_a_parse_error_whatever_the_depth(depth: int) -> None:
    body = b'{"a":' + b"[" * depth + b"]" * depth + b"}"

    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)

    assert info.value.code == -32700 and "nested more than 64" in info.value.message


@pytest.mark.parametrize("value", ["\ud800", "id-\ud800420O", "\udfff\ud800", "ok \U0001f600 \udc00"])
def test_encode_writes_lone_surrogates_as_escapes_that_read_back_the_same(value: str) -> None:
    message = {"jsonrpc": "2.0", "id": value, "result": {"text": value, "other": "\u00e9"}}

    encoded = jsonrpc.encode(message)

    encoded.decode("utf-8")  # valid UTF-8
    assert json.loads(encoded) == message
    assert jsonrpc.encode_stdlib(message) == encoded


@pytest.mark.parametrize("request_id", [2**63, -(2**80), "x" * 257, "\ud800"])
def test_readable_ids_beyond_the_limits_are_echoed_in_the_error(request_id: Any) -> None:
    payload = {"jsonrpc": "2.0", "id": request_id, "method": "ping"}

    assert jsonrpc.readable_id(payload) == request_id


@pytest.mark.parametrize("request_id", [None, 1.5, True, [1], {"a": 1}])
def test_ids_that_are_not_strings_or_integers_are_not_echoed(request_id: Any) -> None:
    assert jsonrpc.readable_id({"jsonrpc": "2.0", "id": request_id, "method": "ping"}) is None


@pytest.mark.parametrize("body", [b"", b"   ", b"\n\t\r\n"])
def test_empty_body_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)
    assert info.value.code == -32700


@pytest.mark.parametrize(
    "body",
    [b"not json", b"{", b'{"jsonrpc": "2.0",}', b"{'single': 'quotes'}", b"\xff\xfe\x00garbage"],
)
def test_malformed_json_is_a_parse_error(body: bytes) -> None:
    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)
    assert info.value.code == ErrorCode.PARSE_ERROR and int(info.value.code) == -32700
    assert info.value.http_status == 400


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_number_constants_are_rejected_as_parse_errors(constant: str) -> None:
    body = f'{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"v":{constant}}}}}'.encode()
    with pytest.raises(ParseError):
        jsonrpc.parse_body(body)


@pytest.mark.parametrize("opener,closer", [("[", "]"), ('{"a":', "}")])
def test_deeply_nested_json_is_a_parse_error_not_a_crash(opener: str, closer: str) -> None:
    depth = 200_000
    body = (opener * depth + "1" + closer * depth).encode()
    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(body)
    assert info.value.code == -32700


def test_parse_error_message_is_short_and_single_line() -> None:
    with pytest.raises(ParseError) as info:
        jsonrpc.parse_body(b"{" * 10 + b"x")
    assert "\n" not in info.value.message
    assert len(info.value.message) < 400


# ---------------------------------------------------------------------- classify: requests


def test_request_with_integer_id_is_classified_as_request() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {"cursor": "c"}})
    assert isinstance(message, Request)
    assert message.id == 7
    assert message.method == "tools/list"
    assert message.params == {"cursor": "c"}


def test_id_zero_is_a_request_id_not_a_missing_id() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": 0, "method": "ping"})
    assert isinstance(message, Request)
    assert message.id == 0


def test_string_id_is_kept_verbatim() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": "", "method": "ping"})
    assert isinstance(message, Request)
    assert message.id == ""


def test_request_without_params_gets_empty_params() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": "a", "method": "ping"})
    assert isinstance(message, Request)
    assert message.params == {}


@pytest.mark.parametrize("bad_id", [None, True, False, 1.5, [], {}, 1.0])
def test_invalid_id_types_are_invalid_requests(bad_id: Any) -> None:
    with pytest.raises(InvalidRequest) as info:
        jsonrpc.classify({"jsonrpc": "2.0", "id": bad_id, "method": "ping"})
    assert info.value.code == -32600


def test_null_id_is_invalid_even_for_a_response() -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "id": None, "result": {}})


@pytest.mark.parametrize("params", [[], [1, 2], "text", 3, True])
def test_params_that_are_not_an_object_are_invalid(params: Any) -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params})


@pytest.mark.parametrize("params", [[], "text", 3])
def test_notification_params_that_are_not_an_object_are_invalid(params: Any) -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "method": "notifications/initialized", "params": params})


@pytest.mark.parametrize("method", ["", 5, None, ["ping"]])
def test_method_must_be_a_non_empty_string(method: Any) -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "method": method})


@pytest.mark.parametrize(
    "message",
    [
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": 2.0, "id": 1, "method": "ping"},
        {"jsonrpc": None, "id": 1, "method": "ping"},
    ],
)
def test_message_without_jsonrpc_2_0_marker_is_invalid(message: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify(message)


@pytest.mark.parametrize("value", [[], "ping", 1, None, True])
def test_non_object_message_is_invalid(value: Any) -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify(value)


# ---------------------------------------------------------------------- classify: notifications, responses


def test_message_with_method_and_no_id_is_a_notification() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert isinstance(message, Notification)
    assert message.method == "notifications/initialized"
    assert message.params == {}


def test_notification_keeps_its_params() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3}})
    assert isinstance(message, Notification)
    assert message.params == {"requestId": 3}


def test_message_with_id_and_result_is_a_client_response() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": 4, "result": {"roots": []}})
    assert isinstance(message, ClientResponse)
    assert message.id == 4
    assert message.result == {"roots": []}
    assert message.error is None


def test_message_with_id_and_error_is_a_client_response() -> None:
    error = {"code": -32601, "message": "nope"}
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": "s-1", "error": error})
    assert isinstance(message, ClientResponse)
    assert message.id == "s-1"
    assert message.error == error


def test_response_with_both_result_and_error_is_invalid() -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "id": 1, "result": {}, "error": {"code": 1, "message": "x"}})


def test_message_with_only_an_id_is_invalid() -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "id": 1})


def test_response_without_an_id_is_invalid() -> None:
    with pytest.raises(InvalidRequest):
        jsonrpc.classify({"jsonrpc": "2.0", "result": {}})


def test_message_with_method_and_id_is_a_request_even_with_a_result_member() -> None:
    message = jsonrpc.classify({"jsonrpc": "2.0", "id": 2, "method": "ping", "result": {}})
    assert isinstance(message, Request)


# ---------------------------------------------------------------------- readable_id


@pytest.mark.parametrize(
    "payload,expected",
    [
        ({"id": 0}, 0),
        ({"id": "abc"}, "abc"),
        ({"id": None}, None),
        ({"id": True}, None),
        ({"id": 2.5}, None),
        ({}, None),
        ([{"id": 1}], None),
        ("text", None),
    ],
)
def test_readable_id_echoes_only_valid_ids(payload: Any, expected: Any) -> None:
    assert jsonrpc.readable_id(payload) == expected


# ---------------------------------------------------------------------- serialize


def test_result_message_has_the_jsonrpc_envelope() -> None:
    assert jsonrpc.result_message(0, {"x": 1}) == {"jsonrpc": "2.0", "id": 0, "result": {"x": 1}}


def test_error_message_keeps_id_zero() -> None:
    message = jsonrpc.error_message(0, InvalidParams("bad"))
    assert message == {"jsonrpc": "2.0", "id": 0, "error": {"code": -32602, "message": "bad"}}


def test_error_message_omits_an_unreadable_id() -> None:
    message = jsonrpc.error_message(None, ParseError("broken"))
    assert "id" not in message
    assert message["error"] == {"code": -32700, "message": "broken"}


def test_error_message_carries_data_when_given() -> None:
    message = jsonrpc.error_message("r", MCPError("x", code=-32022, data={"supported": ["a"], "requested": "b"}))
    assert message["error"] == {"code": -32022, "message": "x", "data": {"supported": ["a"], "requested": "b"}}


def test_error_code_is_a_plain_integer_in_the_wire_form() -> None:
    error = InvalidRequest("x").to_error()
    assert type(error["code"]) is int
    assert json.loads(json.dumps(error))["code"] == -32600


def test_encode_is_compact_utf8_json() -> None:
    data = jsonrpc.encode({"jsonrpc": "2.0", "id": 1, "result": {"text": "Zürich ☃"}})
    assert isinstance(data, bytes)
    assert b" " not in data.replace("Zürich ☃".encode(), b"")
    assert "Zürich ☃".encode() in data
    assert json.loads(data) == {"jsonrpc": "2.0", "id": 1, "result": {"text": "Zürich ☃"}}


def test_encoded_message_round_trips_through_parse_and_classify() -> None:
    original = {"jsonrpc": "2.0", "id": 0, "method": "tools/call", "params": {"name": "x", "arguments": {"a": [1]}}}
    message = jsonrpc.classify(jsonrpc.parse_body(jsonrpc.encode(original)))
    assert isinstance(message, Request)
    assert (message.id, message.method, message.params) == (0, "tools/call", original["params"])


@pytest.mark.parametrize(
    "name,code",
    [
        ("PARSE_ERROR", -32700),
        ("INVALID_REQUEST", -32600),
        ("METHOD_NOT_FOUND", -32601),
        ("INVALID_PARAMS", -32602),
        ("INTERNAL_ERROR", -32603),
        ("RESOURCE_NOT_FOUND", -32002),
        ("HEADER_MISMATCH", -32020),
        ("MISSING_CLIENT_CAPABILITY", -32021),
        ("UNSUPPORTED_PROTOCOL_VERSION", -32022),
    ],
)
def test_error_codes_have_the_spec_values(name: str, code: int) -> None:
    assert ErrorCode[name] == code


def test_the_stdlib_and_the_fast_encoder_write_the_same_bytes() -> None:
    from flask_mcp.protocol.jsonrpc import encode, encode_stdlib

    message = {"jsonrpc": "2.0", "id": 0, "result": {"text": "é ✓", "n": [1, 2.5, None, True]}}
    assert encode(message) == encode_stdlib(message)
    huge = {"jsonrpc": "2.0", "id": 1, "result": {"n": 2**70}}  # beyond orjson: the stdlib takes over
    assert encode(huge) == encode_stdlib(huge)
