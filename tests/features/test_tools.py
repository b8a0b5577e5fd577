"""Tools: registration, schemas from type hints, listing per revision, calling
and result shaping (spec digest sections 4, 5.1 and 5.3)."""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

import pytest
from conftest import ALL_VERSIONS, connect
from flask import Flask
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from flask_mcp import (
    MCP,
    Audio,
    Context,
    EmbeddedResource,
    Header,
    Image,
    ResourceLink,
    Text,
    ToolError,
    ToolResult,
)
from flask_mcp.testing import MCPTestClient

MakeClient = Callable[..., MCPTestClient]

ALL = ALL_VERSIONS
LEGACY = ALL[1:]
PNG = b"\x89PNG\r\n\x1a\n fake image bytes"
WAV = b"RIFF fake wav"
SECRET = "db-password-hunter2"
ICON = {"src": "https://example.com/icon.png", "mimeType": "image/png", "sizes": ["48x48"]}


class Point(BaseModel):
    x: int
    y: int = 0


class Segment(BaseModel):
    start: Point
    end: Point


class Weather(TypedDict):
    city: str
    celsius: float


@pytest.fixture
def mcp() -> MCP:
    return MCP(name="tools-server", version="0.1.0")


@pytest.fixture
def app(mcp: MCP) -> Flask:
    app = Flask("tools")
    mcp.init_app(app)
    return app


def listing(make_client: MakeClient, app: Flask, version: str) -> dict[str, dict[str, Any]]:
    result = connect(make_client, app, version).list_tools().result
    return {tool["name"]: tool for tool in result["tools"]}


def all_keys(node: Any) -> set[str]:
    if isinstance(node, dict):
        return set(node) | {k for value in node.values() for k in all_keys(value)}
    if isinstance(node, list):
        return {k for value in node for k in all_keys(value)}
    return set()


# ---------------------------------------------------------------------- registration


def test_bare_decorator_returns_the_function_unchanged(mcp: MCP) -> None:
    def add(a: int, b: int) -> int:
        return a + b

    assert mcp.tool(add) is add
    assert add(2, 3) == 5
    assert "add" in mcp.tools


def test_decorator_with_options_returns_the_function_unchanged(mcp: MCP) -> None:
    def impl(a: int) -> int:
        return a * 2

    assert mcp.tool(name="double", title="Double")(impl) is impl
    assert impl(4) == 8
    assert "double" in mcp.tools
    assert "impl" not in mcp.tools


def test_duplicate_tool_name_raises_at_decoration(mcp: MCP) -> None:
    @mcp.tool
    def thing() -> str:
        return "a"

    with pytest.raises(ValueError, match="thing"):

        @mcp.tool(name="thing")
        def other() -> str:
            return "b"


def test_var_positional_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises((TypeError, ValueError), match="args"):

        @mcp.tool
        def spread(*args: int) -> int:
            return sum(args)


def test_var_keyword_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises((TypeError, ValueError), match="kwargs"):

        @mcp.tool
        def loose(**kwargs: int) -> int:
            return len(kwargs)


def test_positional_only_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises((TypeError, ValueError), match="'a'"):

        @mcp.tool
        def positional(a: int, /) -> int:
            return a


@pytest.mark.parametrize("name", ["has space", "slash/name", "é", "x" * 129, "semi;colon", "tab\tname"])
def test_invalid_tool_name_raises_at_decoration(mcp: MCP, name: str) -> None:
    def fn() -> str:
        return ""

    with pytest.raises(ValueError, match="name"):
        mcp.tool(name=name)(fn)


@pytest.mark.parametrize("name", ["a", "get_weather", "ns.tool-name_2", "x" * 128])
def test_valid_tool_names_are_accepted(mcp: MCP, name: str) -> None:
    def fn() -> str:
        return ""

    mcp.tool(name=name)(fn)
    assert name in mcp.tools


def test_header_on_a_number_parameter_raises_at_decoration(mcp: MCP) -> None:
    with pytest.raises(ValueError, match="x-mcp-header"):

        @mcp.tool
        def priced(price: Annotated[float, Header("Price")]) -> str:
            return str(price)


def test_duplicate_header_names_raise_at_decoration(mcp: MCP) -> None:
    with pytest.raises(ValueError):

        @mcp.tool
        def twice(a: Annotated[str, Header("Zone")], b: Annotated[str, Header("zone")]) -> str:
            return a + b


def test_failed_registration_leaves_no_tool_behind(mcp: MCP) -> None:
    with pytest.raises((TypeError, ValueError)):

        @mcp.tool
        def broken(*args: int) -> int:
            return 0

    assert "broken" not in mcp.tools
    assert len(mcp.tools) == 0


def test_tools_can_be_registered_after_init_app(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    assert listing(make_client, app, "2026-07-28") == {}

    @mcp.tool
    def late() -> str:
        return "late"

    assert set(listing(make_client, app, "2026-07-28")) == {"late"}


def test_remove_tool_changes_the_listing(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def keep() -> str:
        return "k"

    @mcp.tool
    def drop() -> str:
        return "d"

    client = connect(make_client, app, "2025-11-25")
    assert [t["name"] for t in client.list_tools().result["tools"]] == ["keep", "drop"]
    mcp.remove_tool("drop")
    assert [t["name"] for t in client.list_tools().result["tools"]] == ["keep"]
    assert client.call_tool("drop", {}).error["code"] == -32602


def test_removing_an_unknown_tool_raises(mcp: MCP) -> None:
    with pytest.raises(KeyError):
        mcp.remove_tool("ghost")


# ---------------------------------------------------------------------- listing per revision


@pytest.fixture
def fancy(mcp: MCP) -> None:
    @mcp.tool(
        name="fancy",
        title="Fancy Tool",
        description="Does fancy things.",
        annotations={"title": "Annotated title", "readOnlyHint": True, "openWorldHint": False},
        icons=[ICON],
        meta={"com.example/owner": "team-a"},
    )
    def fancy_impl(n: int) -> dict[str, int]:
        """Docstring that the explicit description overrides."""
        return {"n": n}


def test_tool_options_show_in_the_2026_listing(make_client: MakeClient, app: Flask, fancy: None) -> None:
    tool = listing(make_client, app, "2026-07-28")["fancy"]
    assert tool["title"] == "Fancy Tool"
    assert tool["description"] == "Does fancy things."
    assert tool["annotations"] == {"title": "Annotated title", "readOnlyHint": True, "openWorldHint": False}
    assert tool["icons"] == [ICON]
    assert tool["_meta"] == {"com.example/owner": "team-a"}
    assert tool["outputSchema"]["type"] == "object"


def test_2025_03_26_listing_has_no_title_output_schema_meta_or_icons(
    make_client: MakeClient, app: Flask, fancy: None
) -> None:
    tool = listing(make_client, app, "2025-03-26")["fancy"]
    assert set(tool) <= {"name", "description", "inputSchema", "annotations"}
    assert tool["annotations"]["title"] == "Annotated title"
    assert tool["description"] == "Does fancy things."


def test_2025_06_18_listing_adds_title_output_schema_and_meta_but_no_icons(
    make_client: MakeClient, app: Flask, fancy: None
) -> None:
    tool = listing(make_client, app, "2025-06-18")["fancy"]
    assert tool["title"] == "Fancy Tool"
    assert tool["outputSchema"]["type"] == "object"
    assert tool["_meta"] == {"com.example/owner": "team-a"}
    assert "icons" not in tool


def test_2025_11_25_listing_adds_icons(make_client: MakeClient, app: Flask, fancy: None) -> None:
    tool = listing(make_client, app, "2025-11-25")["fancy"]
    assert tool["icons"] == [ICON]
    assert tool["title"] == "Fancy Tool"


def test_listing_keeps_registration_order(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    def fn() -> str:
        return "x"

    for name in ("zeta", "alpha", "mid"):
        mcp.add_tool(fn, name=name)
    for version in ALL:
        assert list(listing(make_client, app, version)) == ["zeta", "alpha", "mid"]


def test_bare_tool_is_named_after_the_function_and_described_by_its_docstring(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    @mcp.tool
    def get_time() -> str:
        """Tell the time.

        Longer explanation that is part of the description too.
        """
        return "noon"

    tool = listing(make_client, app, "2026-07-28")["get_time"]
    assert tool["description"].startswith("Tell the time.")
    assert "title" not in tool
    assert "outputSchema" not in tool


# ---------------------------------------------------------------------- input schemas


@pytest.fixture
def search(mcp: MCP) -> None:
    @mcp.tool
    def search(
        query: str,
        limit: int = 10,
        mode: Literal["fast", "deep"] = "fast",
        region: Annotated[str, Field(description="Region code, e.g. eu-west.")] = "eu-west",
        tags: list[str] | None = None,
    ) -> str:
        """Search the catalogue.

        Args:
            query: The text to look for.
            limit: Maximum number of hits,
                between 1 and 100.
            region: Ignored: the Field description wins.
        """
        return f"{query}:{limit}:{mode}:{region}:{tags}"


def test_input_schema_comes_from_type_hints(make_client: MakeClient, app: Flask, search: None) -> None:
    schema = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]
    assert schema["type"] == "object"
    props = schema["properties"]
    assert props["query"]["type"] == "string"
    assert props["limit"]["type"] == "integer"
    assert props["mode"]["enum"] == ["fast", "deep"]
    assert schema["required"] == ["query"]


def test_input_schema_forbids_additional_properties(make_client: MakeClient, app: Flask, search: None) -> None:
    schema = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]
    assert schema["additionalProperties"] is False


def test_defaults_appear_in_the_input_schema(make_client: MakeClient, app: Flask, search: None) -> None:
    props = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]["properties"]
    assert props["limit"]["default"] == 10
    assert props["mode"]["default"] == "fast"
    assert props["region"]["default"] == "eu-west"
    assert "default" not in props["query"]


def test_google_style_args_give_parameter_descriptions(make_client: MakeClient, app: Flask, search: None) -> None:
    props = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]["properties"]
    assert props["query"]["description"] == "The text to look for."
    assert props["limit"]["description"] == "Maximum number of hits, between 1 and 100."


def test_annotated_field_description_beats_the_docstring(make_client: MakeClient, app: Flask, search: None) -> None:
    props = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]["properties"]
    assert props["region"]["description"] == "Region code, e.g. eu-west."


def test_args_section_is_not_part_of_the_tool_description(make_client: MakeClient, app: Flask, search: None) -> None:
    description = listing(make_client, app, "2026-07-28")["search"]["description"]
    assert description == "Search the catalogue."


def test_schema_has_no_generated_titles(make_client: MakeClient, app: Flask, search: None) -> None:
    schema = listing(make_client, app, "2026-07-28")["search"]["inputSchema"]
    for prop in schema["properties"].values():
        assert "title" not in prop


def test_nested_models_are_inlined_without_defs_or_refs(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def length(segment: Segment, origin: Point | None = None) -> float:
        """Length of a segment."""
        return float(abs(segment.end.x - segment.start.x))

    schema = listing(make_client, app, "2026-07-28")["length"]["inputSchema"]
    keys = all_keys(schema)
    assert "$defs" not in keys
    assert "$ref" not in keys
    start = schema["properties"]["segment"]["properties"]["start"]
    assert start["properties"]["x"]["type"] == "integer"
    assert start["required"] == ["x"]


def test_nested_model_arguments_are_validated_and_converted(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def width(segment: Segment) -> int:
        return segment.end.x - segment.start.x

    client = connect(make_client, app, "2026-07-28")
    result = client.call_tool("width", {"segment": {"start": {"x": 1}, "end": {"x": 5, "y": 2}}}).result
    assert result["structuredContent"] == {"result": 4}


def test_context_parameter_is_injected_and_absent_from_the_schema(
    make_client: MakeClient, app: Flask, mcp: MCP
) -> None:
    @mcp.tool
    def who(name: str, ctx: Context) -> str:
        return f"{name}@{ctx.protocol_version}:{ctx.method}"

    for version in ALL:
        client = connect(make_client, app, version)
        schema = {t["name"]: t for t in client.list_tools().result["tools"]}["who"]["inputSchema"]
        assert set(schema["properties"]) == {"name"}
        assert schema["required"] == ["name"]
        result = client.call_tool("who", {"name": "ann"}).result
        assert result["content"] == [{"type": "text", "text": f"ann@{version}:tools/call"}]


def test_context_cannot_be_supplied_as_an_argument(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def who(ctx: Context) -> str:
        return ctx.protocol_version

    result = connect(make_client, app, "2025-11-25").call_tool("who", {"ctx": "forged"}).result
    assert result["isError"] is True


def test_tool_without_parameters_has_an_empty_object_schema(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def now() -> str:
        return "now"

    schema = listing(make_client, app, "2025-11-25")["now"]["inputSchema"]
    assert schema["type"] == "object"
    assert schema.get("properties", {}) == {}
    assert schema.get("required", []) == []


def test_raw_input_schema_is_kept_verbatim(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    raw = {
        "type": "object",
        "properties": {"q": {"type": "string", "minLength": 1, "description": "Query"}},
        "required": ["q"],
        "x-vendor": {"keep": True},
    }

    @mcp.tool(input_schema=raw)
    def lookup(q: str) -> str:
        return q.upper()

    for version in ALL:
        assert listing(make_client, app, version)["lookup"]["inputSchema"] == raw
    assert connect(make_client, app, "2026-07-28").call_tool("lookup", {"q": "abc"}).result["content"] == [
        {"type": "text", "text": "ABC"}
    ]


def test_raw_input_schema_must_be_an_object_schema(mcp: MCP) -> None:
    def listy() -> str:
        return "x"

    with pytest.raises(ValueError, match="object"):
        mcp.tool(input_schema={"type": "array"})(listy)


# ---------------------------------------------------------------------- output


@pytest.fixture
def outputs(mcp: MCP) -> None:
    @mcp.tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @mcp.tool
    def weather(city: str) -> Weather:
        return {"city": city, "celsius": 21.5}

    @mcp.tool
    def point(x: int) -> Point:
        return Point(x=x, y=x * 2)

    @mcp.tool
    def evens(n: int) -> list[int]:
        return list(range(0, n, 2))

    @mcp.tool
    def greet(name: str) -> str:
        return f"Hello, {name}!"


def test_return_annotation_gives_an_object_output_schema(make_client: MakeClient, app: Flask, outputs: None) -> None:
    tools = listing(make_client, app, "2025-11-25")
    schema = tools["weather"]["outputSchema"]
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"city", "celsius"}
    assert "$ref" not in all_keys(tools["point"]["outputSchema"])
    assert tools["point"]["outputSchema"]["properties"]["x"]["type"] == "integer"


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-06-18"])
def test_object_results_carry_structured_content_and_a_json_text_block(
    make_client: MakeClient, app: Flask, outputs: None, version: str
) -> None:
    client = connect(make_client, app, version)
    result = client.call_tool("weather", {"city": "Oslo"}).result
    assert result["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert [block["type"] for block in result["content"]] == ["text"]
    assert json.loads(result["content"][0]["text"]) == {"city": "Oslo", "celsius": 21.5}
    assert result.get("isError", False) is False


def test_pydantic_model_results_are_serialized(make_client: MakeClient, app: Flask, outputs: None) -> None:
    result = connect(make_client, app, "2025-11-25").call_tool("point", {"x": 3}).result
    assert result["structuredContent"] == {"x": 3, "y": 6}


@pytest.mark.parametrize("tool,arguments,value", [("add", {"a": 2, "b": 3}, 5), ("evens", {"n": 7}, [0, 2, 4, 6])])
def test_non_object_results_are_wrapped_in_result(
    make_client: MakeClient, app: Flask, outputs: None, tool: str, arguments: dict[str, Any], value: Any
) -> None:
    client = connect(make_client, app, "2026-07-28")
    schema = {t["name"]: t for t in client.list_tools().result["tools"]}[tool]["outputSchema"]
    assert schema["type"] == "object"
    assert schema["required"] == ["result"]
    assert "result" in schema["properties"]
    result = client.call_tool(tool, arguments).result
    assert result["structuredContent"] == {"result": value}
    assert json.loads(result["content"][0]["text"]) in (value, {"result": value})


def test_str_return_gives_text_only_and_no_output_schema(make_client: MakeClient, app: Flask, outputs: None) -> None:
    client = connect(make_client, app, "2025-11-25")
    tool = {t["name"]: t for t in client.list_tools().result["tools"]}["greet"]
    assert "outputSchema" not in tool
    result = client.call_tool("greet", {"name": "Ann"}).result
    assert result["content"] == [{"type": "text", "text": "Hello, Ann!"}]
    assert "structuredContent" not in result


def test_2025_03_26_results_have_no_structured_content(make_client: MakeClient, app: Flask, outputs: None) -> None:
    client = connect(make_client, app, "2025-03-26")
    result = client.call_tool("weather", {"city": "Oslo"}).result
    assert "structuredContent" not in result
    assert json.loads(result["content"][0]["text"]) == {"city": "Oslo", "celsius": 21.5}


# ---------------------------------------------------------------------- content helpers


@pytest.fixture
def media(mcp: MCP) -> None:
    @mcp.tool
    def picture() -> Image:
        return Image(PNG, "image/png")

    @mcp.tool
    def sound() -> Audio:
        return Audio(WAV, "audio/wav")

    @mcp.tool
    def document() -> EmbeddedResource:
        return EmbeddedResource("file:///notes.txt", text="notes", mime_type="text/plain")

    @mcp.tool
    def binary() -> EmbeddedResource:
        return EmbeddedResource("file:///b.bin", blob=b"\x00\x01", mime_type="application/octet-stream")

    @mcp.tool
    def link() -> ResourceLink:
        return ResourceLink("file:///report.pdf", "report", title="The report", mime_type="application/pdf")

    @mcp.tool
    def mixed() -> list[Text | Image]:
        return [Text("caption"), Image(PNG)]

    @mcp.tool
    def custom() -> ToolResult:
        return ToolResult(content=["partial", Text("more")], structured={"done": False}, is_error=True)


def call(make_client: MakeClient, app: Flask, version: str, name: str) -> dict[str, Any]:
    return connect(make_client, app, version).call_tool(name, {}).result


@pytest.mark.parametrize("version", ALL)
def test_image_helper_gives_a_base64_image_block(
    make_client: MakeClient, app: Flask, media: None, version: str
) -> None:
    assert call(make_client, app, version, "picture")["content"] == [
        {"type": "image", "data": base64.b64encode(PNG).decode(), "mimeType": "image/png"}
    ]


def test_audio_helper_gives_a_base64_audio_block(make_client: MakeClient, app: Flask, media: None) -> None:
    assert call(make_client, app, "2025-11-25", "sound")["content"] == [
        {"type": "audio", "data": base64.b64encode(WAV).decode(), "mimeType": "audio/wav"}
    ]


def test_embedded_resource_helper_gives_a_resource_block(make_client: MakeClient, app: Flask, media: None) -> None:
    assert call(make_client, app, "2025-06-18", "document")["content"] == [
        {"type": "resource", "resource": {"uri": "file:///notes.txt", "mimeType": "text/plain", "text": "notes"}}
    ]
    blob = call(make_client, app, "2025-06-18", "binary")["content"][0]["resource"]
    assert blob["blob"] == base64.b64encode(b"\x00\x01").decode()
    assert "text" not in blob


def test_embedded_resource_needs_exactly_one_of_text_or_blob() -> None:
    with pytest.raises(ValueError):
        EmbeddedResource("file:///x")
    with pytest.raises(ValueError):
        EmbeddedResource("file:///x", text="a", blob=b"b")


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25", "2025-06-18"])
def test_resource_link_helper_gives_a_resource_link_block(
    make_client: MakeClient, app: Flask, media: None, version: str
) -> None:
    assert call(make_client, app, version, "link")["content"] == [
        {
            "type": "resource_link",
            "uri": "file:///report.pdf",
            "name": "report",
            "title": "The report",
            "mimeType": "application/pdf",
        }
    ]


def test_resource_link_becomes_text_on_2025_03_26(make_client: MakeClient, app: Flask, media: None) -> None:
    content = call(make_client, app, "2025-03-26", "link")["content"]
    assert len(content) == 1
    assert content[0]["type"] == "text"
    assert "file:///report.pdf" in content[0]["text"]


def test_helper_content_has_no_output_schema(make_client: MakeClient, app: Flask, media: None) -> None:
    tools = listing(make_client, app, "2026-07-28")
    for name in ("picture", "sound", "document", "link", "mixed", "custom"):
        assert "outputSchema" not in tools[name], name


def test_list_of_content_gives_several_blocks(make_client: MakeClient, app: Flask, media: None) -> None:
    content = call(make_client, app, "2025-11-25", "mixed")["content"]
    assert [block["type"] for block in content] == ["text", "image"]
    assert content[0]["text"] == "caption"


def test_tool_result_gives_full_control(make_client: MakeClient, app: Flask, media: None) -> None:
    result = call(make_client, app, "2026-07-28", "custom")
    assert result["content"] == [{"type": "text", "text": "partial"}, {"type": "text", "text": "more"}]
    assert result["structuredContent"] == {"done": False}
    assert result["isError"] is True


# ---------------------------------------------------------------------- errors


@pytest.fixture
def failing(mcp: MCP) -> None:
    @mcp.tool
    def refuse(amount: int) -> str:
        raise ToolError(f"Amount {amount} exceeds your limit of 100.")

    @mcp.tool
    def crash() -> str:
        raise RuntimeError(f"connection to {SECRET} failed")

    @mcp.tool
    def add(a: int, b: int) -> int:
        return a + b


@pytest.mark.parametrize("version", ALL)
def test_tool_error_becomes_an_is_error_result_with_its_message(
    make_client: MakeClient, app: Flask, failing: None, version: str
) -> None:
    response = connect(make_client, app, version).call_tool("refuse", {"amount": 500})
    assert response.status_code == 200
    assert response.result["isError"] is True
    assert response.result["content"] == [{"type": "text", "text": "Amount 500 exceeds your limit of 100."}]


@pytest.mark.parametrize("version", ALL)
def test_unexpected_exception_gives_a_generic_is_error_result_without_leaking(
    make_client: MakeClient, app: Flask, failing: None, version: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        response = connect(make_client, app, version).call_tool("crash", {})
    assert response.status_code == 200
    result = response.result
    assert result["isError"] is True
    assert SECRET not in response.http.get_data(as_text=True)
    assert "RuntimeError" not in response.http.get_data(as_text=True)
    assert result["content"][0]["text"]
    records = [r for r in caplog.records if r.exc_info]
    assert records, "the traceback must be logged"
    assert any(isinstance(r.exc_info[1], RuntimeError) for r in records if r.exc_info)


@pytest.mark.parametrize("arguments", [{"a": "two", "b": 3}, {"a": 1}, {"a": 1, "b": 2, "c": 3}])
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_invalid_arguments_are_an_is_error_result_from_2025_11_25(
    make_client: MakeClient, app: Flask, failing: None, version: str, arguments: dict[str, Any]
) -> None:
    response = connect(make_client, app, version).call_tool("add", arguments)
    assert response.status_code == 200
    result = response.result
    assert result["isError"] is True
    assert result["content"][0]["type"] == "text"
    assert "add" in result["content"][0]["text"]


@pytest.mark.parametrize("arguments", [{"a": "two", "b": 3}, {"a": 1}, {"a": 1, "b": 2, "c": 3}])
@pytest.mark.parametrize("version", ["2025-06-18", "2025-03-26"])
def test_invalid_arguments_are_invalid_params_before_2025_11_25(
    make_client: MakeClient, app: Flask, failing: None, version: str, arguments: dict[str, Any]
) -> None:
    response = connect(make_client, app, version).call_tool("add", arguments)
    assert response.error["code"] == -32602


def test_invalid_argument_message_names_the_field(make_client: MakeClient, app: Flask, failing: None) -> None:
    text = connect(make_client, app, "2025-11-25").call_tool("add", {"a": "two", "b": 3}).result["content"][0]["text"]
    assert "a" in text.split(":", 1)[1]


@pytest.mark.parametrize("version", ALL)
def test_unknown_tool_is_invalid_params(make_client: MakeClient, app: Flask, failing: None, version: str) -> None:
    response = connect(make_client, app, version).call_tool("nope", {}, id="u")
    assert response.error["code"] == -32602
    assert response.message["id"] == "u"


@pytest.mark.parametrize("version", ALL)
def test_missing_tool_name_is_invalid_params(make_client: MakeClient, app: Flask, failing: None, version: str) -> None:
    client = connect(make_client, app, version)
    response = client.request("tools/call", {"arguments": {}})
    assert response.error["code"] == -32602


@pytest.mark.parametrize("arguments", [[1, 2], "a=1", 5])
@pytest.mark.parametrize("version", ALL)
def test_arguments_that_are_not_an_object_are_invalid_params(
    make_client: MakeClient, app: Flask, failing: None, version: str, arguments: Any
) -> None:
    response = connect(make_client, app, version).call_tool("add", arguments)
    assert response.error["code"] == -32602


def test_missing_arguments_for_a_tool_without_parameters_is_fine(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    @mcp.tool
    def ping_tool() -> str:
        return "pong"

    client = connect(make_client, app, "2025-11-25")
    assert client.call_tool("ping_tool").result["content"] == [{"type": "text", "text": "pong"}]


# ---------------------------------------------------------------------- pagination


@pytest.fixture
def paged_app(mcp: MCP) -> Flask:
    app = Flask("paged")
    app.config["MCP_PAGE_SIZE"] = 2
    mcp.init_app(app)

    def fn() -> str:
        return "x"

    for index in range(5):
        mcp.add_tool(fn, name=f"tool_{index}")
    return app


@pytest.mark.parametrize("version", ALL)
def test_tools_list_pages_follow_to_the_end(make_client: MakeClient, paged_app: Flask, version: str) -> None:
    client = connect(make_client, paged_app, version)
    names: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        result = client.list_tools(cursor).result
        pages += 1
        assert len(result["tools"]) <= 2
        names += [tool["name"] for tool in result["tools"]]
        if "nextCursor" not in result:
            break
        cursor = result["nextCursor"]
        assert isinstance(cursor, str) and cursor
        assert pages < 10
    assert names == [f"tool_{i}" for i in range(5)]
    assert pages == 3


def test_first_page_has_a_next_cursor_and_the_page_size(make_client: MakeClient, paged_app: Flask) -> None:
    result = connect(make_client, paged_app, "2026-07-28").list_tools().result
    assert [tool["name"] for tool in result["tools"]] == ["tool_0", "tool_1"]
    assert isinstance(result["nextCursor"], str)


def test_every_page_shares_the_cache_scope(make_client: MakeClient, paged_app: Flask) -> None:
    client = connect(make_client, paged_app, "2026-07-28")
    first = client.list_tools().result
    second = client.list_tools(first["nextCursor"]).result
    assert first["cacheScope"] == second["cacheScope"]


@pytest.mark.parametrize("cursor", ["garbage!", "bzo5OTk", "b246LTE", "AAAA", 7, ["c"]])
@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_invalid_cursor_is_invalid_params(make_client: MakeClient, paged_app: Flask, version: str, cursor: Any) -> None:
    client = connect(make_client, paged_app, version)
    response = client.request("tools/list", {"cursor": cursor})
    assert response.error["code"] == -32602


# ---------------------------------------------------------------------- more result shaping


def test_result_not_fitting_the_return_annotation_is_a_logged_is_error_result(
    make_client: MakeClient, app: Flask, mcp: MCP, caplog: pytest.LogCaptureFixture
) -> None:
    @mcp.tool
    def liar() -> int:
        return "not a number"  # type: ignore[return-value]

    with caplog.at_level(logging.ERROR, logger="flask_mcp"):
        result = connect(make_client, app, "2025-11-25").call_tool("liar", {}).result
    assert result["isError"] is True
    assert "structuredContent" not in result
    assert any(record.exc_info for record in caplog.records)


def test_content_meta_is_dropped_on_2025_03_26(make_client: MakeClient, app: Flask, mcp: MCP) -> None:
    """Content ``_meta`` exists from 2025-06-18 (spec digest 5.3); older clients must not get it."""

    @mcp.tool
    def tagged() -> Text:
        return Text("hello", meta={"com.example/tag": "x"})

    newer = connect(make_client, app, "2025-06-18").call_tool("tagged", {}).result["content"][0]
    assert newer["_meta"] == {"com.example/tag": "x"}
    older = connect(make_client, app, "2025-03-26").call_tool("tagged", {}).result["content"][0]
    assert older["text"] == "hello"
    assert "_meta" not in older


def test_an_unannotated_parameter_is_warned_about_at_the_decorator_and_still_works(app: Flask, mcp: MCP) -> None:
    with pytest.warns(UserWarning, match="Tool 'shout': parameter 'text' has no type annotation") as caught:
        @mcp.tool
        def shout(text, times: int = 1) -> str:  # type: ignore[no-untyped-def]  # the case under test
            return str(text).upper() * times

    [warning] = caught
    assert warning.filename == __file__  # the app's own line, where the fix goes
    answer = MCPTestClient(app).call_tool("shout", {"text": "hi", "times": 2})
    assert answer.result["content"][0]["text"] == "HIHI"


class Shelf:
    """An app's own class: not JSON, no schema."""


def test_an_arbitrary_class_as_a_parameter_is_refused_at_registration_naming_it(mcp: MCP) -> None:
    with pytest.raises(TypeError, match=r"^Tool 'restock': parameter 'shelf' has type Shelf, which arguments "):
        @mcp.tool
        def restock(shelf: Shelf) -> str:
            return ""
