"""2026-07-28 standard request headers (spec digest section 3.10, SEP-2243)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from flask_mcp.protocol import headers
from flask_mcp.protocol.errors import HeaderMismatch
from flask_mcp.protocol.headers import (
    HeaderParam,
    check_param_headers,
    check_standard_headers,
    collect_header_params,
    decode_value,
    is_header_token,
)


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


# ---------------------------------------------------------------------- Mcp-Method


def test_matching_mcp_method_passes() -> None:
    check_standard_headers({"mcp-method": "tools/list"}, "tools/list", {})


def test_missing_mcp_method_is_a_header_mismatch() -> None:
    with pytest.raises(HeaderMismatch) as info:
        check_standard_headers({}, "tools/list", {})
    assert info.value.code == -32020
    assert info.value.http_status == 400


def test_different_mcp_method_is_a_header_mismatch() -> None:
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": "tools/call"}, "tools/list", {})


@pytest.mark.parametrize("value", ["TOOLS/LIST", "Tools/List", "tools/List"])
def test_mcp_method_value_compares_case_sensitively(value: str) -> None:
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": value}, "tools/list", {})


@pytest.mark.parametrize("value", [" tools/list", "tools/list ", "\ttools/list  "])
def test_surrounding_whitespace_of_mcp_method_is_stripped(value: str) -> None:
    check_standard_headers({"mcp-method": value}, "tools/list", {})


def test_base64_encoded_mcp_method_is_decoded_before_comparing() -> None:
    check_standard_headers({"mcp-method": b64("tools/list")}, "tools/list", {})


# ---------------------------------------------------------------------- Mcp-Name


@pytest.mark.parametrize(
    "method,params",
    [
        ("tools/call", {"name": "echo"}),
        ("prompts/get", {"name": "echo"}),
        ("resources/read", {"uri": "echo"}),
    ],
)
def test_mcp_name_repeats_the_target_of_named_methods(method: str, params: dict[str, Any]) -> None:
    check_standard_headers({"mcp-method": method, "mcp-name": "echo"}, method, params)
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": method}, method, params)
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": method, "mcp-name": "other"}, method, params)


def test_resources_read_name_is_the_uri_not_a_name_param() -> None:
    params = {"uri": "file:///a.txt", "name": "ignored"}
    check_standard_headers({"mcp-method": "resources/read", "mcp-name": "file:///a.txt"}, "resources/read", params)
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": "resources/read", "mcp-name": "ignored"}, "resources/read", params)


def test_mcp_name_value_compares_case_sensitively() -> None:
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": "tools/call", "mcp-name": "Echo"}, "tools/call", {"name": "echo"})


def test_surrounding_whitespace_of_mcp_name_is_stripped() -> None:
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": "  echo  "}, "tools/call", {"name": "echo"})


def test_mcp_name_is_not_required_for_methods_without_a_target() -> None:
    check_standard_headers({"mcp-method": "tools/list"}, "tools/list", {"name": "irrelevant"})


def test_mcp_name_can_carry_non_ascii_names_in_base64() -> None:
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": b64("météo")}, "tools/call", {"name": "météo"})


def test_mcp_name_base64_preserves_leading_and_trailing_whitespace() -> None:
    params = {"name": " padded "}
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": b64(" padded ")}, "tools/call", params)
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": "tools/call", "mcp-name": b64("padded")}, "tools/call", params)


def test_name_that_looks_like_an_unterminated_sentinel_matches_literally() -> None:
    params = {"name": "=?base64?SGVsbG8="}
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": "=?base64?SGVsbG8="}, "tools/call", params)


def test_raw_non_ascii_mcp_name_is_rejected() -> None:
    with pytest.raises(HeaderMismatch):
        check_standard_headers({"mcp-method": "tools/call", "mcp-name": "météo"}, "tools/call", {"name": "météo"})


# ---------------------------------------------------------------------- decode_value


def test_valid_base64_sentinel_is_decoded() -> None:
    assert decode_value("=?base64?SGVsbG8=?=", "Mcp-Name") == "Hello"


def test_base64_sentinel_decodes_utf8() -> None:
    assert decode_value(b64("Zürich ☃"), "Mcp-Name") == "Zürich ☃"


def test_base64_sentinel_with_bad_padding_is_rejected() -> None:
    with pytest.raises(HeaderMismatch) as info:
        decode_value("=?base64?SGVsbG8?=", "Mcp-Name")
    assert info.value.code == -32020


def test_base64_sentinel_with_characters_outside_the_alphabet_is_rejected() -> None:
    with pytest.raises(HeaderMismatch):
        decode_value("=?base64?SGVs!!!bG8=?=", "Mcp-Name")


def test_base64_sentinel_that_is_not_utf8_is_rejected() -> None:
    with pytest.raises(HeaderMismatch):
        decode_value("=?base64?/w==?=", "Mcp-Name")  # a lone 0xFF byte


@pytest.mark.parametrize(
    "value",
    [
        "=?base64?SGVsbG8=",  # no closing ?=
        "?base64?SGVsbG8=?=",  # no leading =
        "=?BASE64?SGVsbG8=?=",  # markers are lowercase only
        "=?b64?SGVsbG8=?=",
        "x=?base64?SGVsbG8=?=",
        "plain",
    ],
)
def test_values_without_the_exact_sentinel_wrapper_are_literal(value: str) -> None:
    assert decode_value(value, "Mcp-Name") == value


@pytest.mark.parametrize("value", ["a\x00b", "a\x01b", "line\nbreak", "cr\rhere", "del\x7f", "é"])
def test_control_and_non_ascii_characters_in_a_raw_value_are_rejected(value: str) -> None:
    with pytest.raises(HeaderMismatch):
        decode_value(value, "Mcp-Name")


def test_spaces_and_tabs_inside_a_value_are_allowed() -> None:
    assert decode_value("a b\tc", "Mcp-Name") == "a b\tc"


# ---------------------------------------------------------------------- Mcp-Param-*

REGION = HeaderParam("Region", ("region",), "string")
COUNT = HeaderParam("Count", ("count",), "integer")
VERBOSE = HeaderParam("Verbose", ("verbose",), "boolean")
NESTED = HeaderParam("Zone", ("where", "zone"), "string")


def test_matching_string_param_header_passes() -> None:
    check_param_headers({"mcp-param-region": "eu-west"}, (REGION,), {"region": "eu-west"})


def test_missing_param_header_for_a_present_argument_is_a_mismatch() -> None:
    with pytest.raises(HeaderMismatch) as info:
        check_param_headers({}, (REGION,), {"region": "eu-west"})
    assert info.value.code == -32020


def test_different_param_header_is_a_mismatch() -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-region": "us-east"}, (REGION,), {"region": "eu-west"})


def test_string_param_compares_case_sensitively() -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-region": "EU-WEST"}, (REGION,), {"region": "eu-west"})


def test_param_header_whitespace_is_stripped() -> None:
    check_param_headers({"mcp-param-region": "  eu-west "}, (REGION,), {"region": "eu-west"})


def test_param_header_in_base64_is_decoded() -> None:
    check_param_headers({"mcp-param-region": b64("Zürich")}, (REGION,), {"region": "Zürich"})


@pytest.mark.parametrize("arguments", [{}, {"region": None}])
def test_no_param_header_is_expected_for_an_absent_or_null_argument(arguments: dict[str, Any]) -> None:
    check_param_headers({}, (REGION,), arguments)


@pytest.mark.parametrize("text", ["42", "42.0", "4.2e1", " 42 ", "042"])
def test_integer_param_compares_numerically(text: str) -> None:
    check_param_headers({"mcp-param-count": text}, (COUNT,), {"count": 42})


@pytest.mark.parametrize("text", ["43", "41.9", "forty-two", "", "0x2a", "true"])
def test_integer_param_with_a_different_or_non_numeric_value_is_a_mismatch(text: str) -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-count": text}, (COUNT,), {"count": 42})


def test_zero_is_a_value_that_needs_its_header() -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({}, (COUNT,), {"count": 0})
    check_param_headers({"mcp-param-count": "0"}, (COUNT,), {"count": 0})


@pytest.mark.parametrize("value,text", [(True, "true"), (False, "false")])
def test_boolean_param_is_true_or_false(value: bool, text: str) -> None:
    check_param_headers({"mcp-param-verbose": text}, (VERBOSE,), {"verbose": value})


@pytest.mark.parametrize("text", ["True", "TRUE", "1", "yes", "false"])
def test_boolean_param_rejects_other_spellings(text: str) -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-verbose": text}, (VERBOSE,), {"verbose": True})


def test_string_param_that_looks_numeric_compares_as_text() -> None:
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-region": "42.0"}, (REGION,), {"region": "42"})


def test_nested_param_follows_its_property_path() -> None:
    check_param_headers({"mcp-param-zone": "z1"}, (NESTED,), {"where": {"zone": "z1"}})
    with pytest.raises(HeaderMismatch):
        check_param_headers({"mcp-param-zone": "z2"}, (NESTED,), {"where": {"zone": "z1"}})
    check_param_headers({}, (NESTED,), {"where": {}})


def test_every_declared_param_is_checked() -> None:
    headers = {"mcp-param-region": "eu", "mcp-param-count": "3"}
    check_param_headers(headers, (REGION, COUNT, VERBOSE), {"region": "eu", "count": 3})
    with pytest.raises(HeaderMismatch):
        check_param_headers(headers, (REGION, COUNT, VERBOSE), {"region": "eu", "count": 3, "verbose": False})


# ---------------------------------------------------------------------- collect_header_params


def test_collect_header_params_finds_annotated_properties() -> None:
    schema = {
        "type": "object",
        "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "count": {"type": "integer", "x-mcp-header": "Count"},
            "flag": {"type": "boolean", "x-mcp-header": "Flag"},
            "plain": {"type": "string"},
        },
    }
    assert collect_header_params(schema) == (
        HeaderParam("Region", ("region",), "string"),
        HeaderParam("Count", ("count",), "integer"),
        HeaderParam("Flag", ("flag",), "boolean"),
    )


def test_collect_header_params_follows_nested_properties() -> None:
    schema = {
        "type": "object",
        "properties": {"where": {"type": "object", "properties": {"zone": {"type": "string", "x-mcp-header": "Zone"}}}},
    }
    assert collect_header_params(schema) == (HeaderParam("Zone", ("where", "zone"), "string"),)


def test_schema_without_annotations_has_no_header_params() -> None:
    assert collect_header_params({"type": "object", "properties": {"a": {"type": "string"}}}) == ()
    assert collect_header_params({"type": "object"}) == ()


@pytest.mark.parametrize("header", ["", "Two Words", "Région", "a:b", "a/b", "x\r\ny", "tab\there", "(x)"])
def test_header_names_that_are_not_http_tokens_are_refused(header: str) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": header}}}
    with pytest.raises(ValueError, match="x-mcp-header"):
        collect_header_params(schema)


@pytest.mark.parametrize("header", [12, 1.5, True, ["Region"], {"name": "Region"}])
def test_header_names_that_are_not_strings_are_refused(header: Any) -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "x-mcp-header": header}}}
    with pytest.raises(ValueError):
        collect_header_params(schema)


@pytest.mark.parametrize("kind", ["number", "object", "array", "null", None])
def test_header_on_a_property_that_is_not_string_integer_or_boolean_is_refused(kind: Any) -> None:
    prop: dict[str, Any] = {"x-mcp-header": "Value"}
    if kind is not None:
        prop["type"] = kind
    schema = {"type": "object", "properties": {"a": prop}}
    with pytest.raises(ValueError, match="x-mcp-header"):
        collect_header_params(schema)


def test_duplicate_header_names_are_refused_case_insensitively() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "Region"},
            "b": {"type": "string", "x-mcp-header": "region"},
        },
    }
    with pytest.raises(ValueError, match="Region|region"):
        collect_header_params(schema)


def test_duplicate_header_names_across_nesting_levels_are_refused() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "x-mcp-header": "Zone"},
            "b": {"type": "object", "properties": {"c": {"type": "string", "x-mcp-header": "ZONE"}}},
        },
    }
    with pytest.raises(ValueError):
        collect_header_params(schema)


def test_header_inside_array_items_is_refused() -> None:
    """Only properties reachable through a chain of ``properties`` keys may carry
    x-mcp-header (spec digest 3.10); clients drop tools that break this."""
    schema = {
        "type": "object",
        "properties": {
            "list": {
                "type": "array",
                "items": {"type": "object", "properties": {"z": {"type": "string", "x-mcp-header": "Z"}}},
            }
        },
    }
    with pytest.raises(ValueError):
        collect_header_params(schema)


def test_header_inside_a_composition_keyword_is_refused() -> None:
    schema = {
        "type": "object",
        "properties": {
            "choice": {"anyOf": [{"type": "object", "properties": {"z": {"type": "string", "x-mcp-header": "Z"}}}]}
        },
    }
    with pytest.raises(ValueError):
        collect_header_params(schema)


@pytest.mark.parametrize("name", ["Region", "X-Trace_Id", "a.b", "!#$%&'*+-.^_`|~09AZaz"])
def test_http_tokens_are_recognised(name: str) -> None:
    assert is_header_token(name)


@pytest.mark.parametrize("name", ["", " ", "a b", "a,b", "a;b", 'a"b', "a\x00"])
def test_non_tokens_are_recognised(name: str) -> None:
    assert not is_header_token(name)


# ---------------------------------------------------------------------- remembered literal values


@pytest.mark.parametrize("target", [" echo", "echo\t", "=?base64?ZWNobw==?="])
def test_a_value_that_does_not_stand_for_itself_is_refused_every_time(target: str) -> None:
    # Repeated exactly, yet decoding (or stripping) changes it: never remembered as literal.
    for _ in range(2):
        with pytest.raises(HeaderMismatch):
            check_standard_headers({"mcp-method": "tools/call", "mcp-name": target}, "tools/call", {"name": target})
    assert target not in headers.LITERAL_VALUES


def test_literal_values_are_remembered_within_bounds() -> None:
    headers.LITERAL_VALUES.clear()
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": "echo"}, "tools/call", {"name": "echo"})
    assert {"tools/call", "echo"} <= headers.LITERAL_VALUES
    long_name = "n" * (headers._LITERAL_MAX_LENGTH + 1)
    check_standard_headers({"mcp-method": "tools/call", "mcp-name": long_name}, "tools/call", {"name": long_name})
    assert long_name not in headers.LITERAL_VALUES
    for index in range(headers._LITERAL_MAX + 50):  # names a client chooses: the set stops growing
        name = f"tool{index}"
        check_standard_headers({"mcp-method": "tools/call", "mcp-name": name}, "tools/call", {"name": name})
    assert len(headers.LITERAL_VALUES) == headers._LITERAL_MAX
    with pytest.raises(HeaderMismatch):  # a remembered name still has to be the one in the body
        check_standard_headers({"mcp-method": "tools/call", "mcp-name": "echo"}, "tools/call", {"name": "other"})
