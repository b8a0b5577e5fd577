"""``flask_mcp/features/schema.py`` on its own: docstrings read into descriptions,
input and output schemas built from type hints, ``$defs`` inlined, and
argument errors reported per field.

test_tools.py checks what a client sees of a registered tool (types,
defaults, Google-style descriptions, nested models); this file checks the
functions behind it directly, where a client cannot look: that every schema
is valid JSON Schema and agrees with the validator, that recursive types keep
the definitions they need, the Sphinx docstring style, and what is refused."""

from __future__ import annotations

import datetime
from typing import Annotated, Any

import jsonschema
import pydantic
import pytest
from typing_extensions import TypedDict  # pydantic needs it for TypedDicts before Python 3.12

from flask_mcp.features.schema import build_input, build_output, describe, inline_defs
from flask_mcp.protocol.request_info import InvalidToolArguments


class Ctx:
    """Stands for the ``Context`` a tool may ask for (``build_input`` takes its type)."""


class Opaque:
    """Stands for content helpers, which have no output schema."""


class Point(pydantic.BaseModel):
    x: int
    y: int = 0


class Node(pydantic.BaseModel):
    """A recursive type: a tree of named nodes."""

    name: str
    children: list[Node] = []


class Totals(TypedDict):
    count: int
    sum: float


def check(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    """A validator for ``schema``, which must itself be valid JSON Schema 2020-12."""
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


# ---------------------------------------------------------------------- describe


def test_a_function_without_a_docstring_has_no_description() -> None:
    def bare(x: int) -> int:
        return x

    assert describe(bare) == (None, {})


def test_sphinx_param_lines_describe_parameters_and_stay_out_of_the_summary() -> None:
    def fetch(url: str, retries: int = 3) -> str:
        """Fetch a page.

        Follows redirects.

        :param url: The address,
            absolute.
        :param int retries: How often to try again.
        :returns: the body
        """
        return url

    summary, params = describe(fetch)
    assert summary == "Fetch a page.\n\nFollows redirects."
    assert params == {"url": "The address, absolute.", "retries": "How often to try again."}


def test_google_args_take_typed_entries_and_end_at_the_next_section() -> None:
    def search(query: str, limit: int = 10) -> list[str]:
        """Search.

        Args:
            query (str): What to find, written as
                field: value pairs.
            limit (int, optional): Maximum hits.

        Returns:
            count: not a parameter.
        """
        return []

    summary, params = describe(search)
    assert summary == "Search."
    assert params == {"query": "What to find, written as field: value pairs.", "limit": "Maximum hits."}


# ---------------------------------------------------------------------- build_input


def test_the_context_parameter_is_found_through_annotated_and_left_out_of_the_schema() -> None:
    def tool(first: str, ctx: Annotated[Ctx, "injected"], last: int = 1) -> str:
        return first

    spec = build_input(tool, context_type=Ctx, tool_name="tool")
    assert spec.context_param == "ctx"
    assert list(spec.schema["properties"]) == ["first", "last"]


def test_validated_arguments_are_a_new_dict_the_call_may_add_to() -> None:
    def tool(text: str, options: dict[str, Any] | None = None, anything: Any = None) -> str:
        return text

    arguments = {"text": "hi", "options": {"k": [1]}, "anything": {"z": 1}}
    validated = build_input(tool, context_type=Ctx, tool_name="tool").validate(arguments)
    validated["ctx"] = object()  # what Tool.invoke does with the context parameter

    assert type(validated) is dict and validated is not arguments
    assert arguments == {"text": "hi", "options": {"k": [1]}, "anything": {"z": 1}}


def test_json_defaults_are_converted_and_others_left_out_of_the_schema() -> None:
    sentinel = object()

    def tool(pair: tuple[int, int] = (1, 2), day: datetime.date = datetime.date(2026, 7, 28),
             marker: Any = sentinel) -> str:
        return ""

    properties = build_input(tool, context_type=Ctx, tool_name="tool").schema["properties"]
    assert properties["pair"]["default"] == [1, 2]
    assert properties["day"]["default"] == "2026-07-28"
    assert "default" not in properties["marker"]


def test_valid_arguments_are_converted_to_the_declared_types() -> None:
    def tool(day: datetime.date, where: Point) -> str:
        return ""

    spec = build_input(tool, context_type=Ctx, tool_name="tool")
    arguments = {"day": "2026-07-28", "where": {"x": 3}}
    assert spec.validate(arguments) == {"day": datetime.date(2026, 7, 28), "where": Point(x=3, y=0)}
    check(spec.schema).validate(arguments)


@pytest.mark.parametrize(
    ("arguments", "details"),
    [
        ({}, [{"field": "nodes", "message": "required argument is missing"}]),
        ({"nodes": [], "extra": 1}, [{"field": "extra", "message": "unexpected argument"}]),
        ({"nodes": [{"name": "a", "children": [{"children": []}]}]},
         [{"field": "nodes.0.children.0.name", "message": "required argument is missing"}]),
    ],
)
def test_refused_arguments_name_each_field_by_its_path(arguments: dict[str, Any], details: list[Any]) -> None:
    def tool(nodes: list[Node]) -> str:
        return ""

    spec = build_input(tool, context_type=Ctx, tool_name="tree")
    with pytest.raises(InvalidToolArguments) as refused:
        spec.validate(arguments)
    assert refused.value.details == details
    expected = "; ".join(f"{d['field']}: {d['message']}" for d in details)
    assert refused.value.message == f"Invalid arguments for tool 'tree': {expected}"
    assert not check(spec.schema).is_valid(arguments), "the schema refuses what the validator refuses"


def test_a_recursive_argument_type_keeps_its_definition_and_stays_valid() -> None:
    def tool(root: Node) -> str:
        return ""

    schema = build_input(tool, context_type=Ctx, tool_name="tool").schema
    assert list(schema["$defs"]) == ["Node"]
    validator = check(schema)
    validator.validate({"root": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}})
    assert not validator.is_valid({"root": {"name": "a", "children": [{"name": 1}]}})


def test_type_hints_that_cannot_be_read_are_a_type_error_naming_the_function() -> None:
    def broken(x: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
        return ""

    with pytest.raises(TypeError, match="Cannot read the type hints of 'broken'"):
        build_input(broken, context_type=Ctx, tool_name="broken")


def test_a_parameter_type_without_a_schema_names_the_tool_the_parameter_the_type_and_what_to_use() -> None:
    def tool(count: int, thing: Opaque) -> str:
        return ""

    with pytest.raises(TypeError) as raised:
        build_input(tool, context_type=Ctx, tool_name="odd")
    message = str(raised.value)
    assert message.startswith("Tool 'odd': parameter 'thing' has type Opaque, which arguments sent as JSON "
                              "cannot be validated into"), message
    assert "pydantic BaseModel, a dataclass or a TypedDict" in message
    assert "take its id and look it up in the tool" in message
    assert "arbitrary_types_allowed" not in message  # pydantic's advice: no use for JSON arguments


def test_an_unsupported_type_inside_another_names_the_parameter_and_its_whole_type() -> None:
    def tool(shelf: list[Opaque] | None = None) -> str:
        return ""

    with pytest.raises(TypeError, match=r"^Tool 'odd': parameter 'shelf' has type list\[.*Opaque\] \| None, "):
        build_input(tool, context_type=Ctx, tool_name="odd")


def test_unannotated_parameters_are_warned_about_only_when_asked_and_any_is_accepted() -> None:
    def tool(loose, chosen: Any, count: int = 1) -> str:  # type: ignore[no-untyped-def]  # the case under test
        return ""

    with pytest.warns(UserWarning) as caught:
        spec = build_input(tool, context_type=Ctx, tool_name="t", warn_unannotated=True)
    assert [str(w.message) for w in caught] == [
        "Tool 't': parameter 'loose' has no type annotation, so any JSON value is accepted and its input schema "
        "tells the model nothing about it; annotate it (loose: str, int, a pydantic model...), or loose: Any "
        "to accept anything on purpose"]
    assert caught[0].filename == __file__  # the warning points at the caller's line, not at flask-mcp
    assert spec.schema["properties"]["loose"] == {}
    build_input(tool, context_type=Ctx, tool_name="t")  # prompts, resources: strings anyway, no warning


# ---------------------------------------------------------------------- build_output


def _no_annotation():  # type: ignore[no-untyped-def]  # the case under test
    return 1


def _returns_none() -> None:
    return None


def _returns_text() -> str:
    return ""


def _returns_any() -> Any:
    return 1


def _returns_content() -> Opaque:
    return Opaque()


def _returns_content_list() -> list[Opaque]:
    return []


def _returns_optional_content() -> Opaque | None:
    return None


@pytest.mark.parametrize("fn", [_no_annotation, _returns_none, _returns_text, _returns_any, _returns_content,
                                _returns_content_list, _returns_optional_content])
def test_results_without_structure_have_no_output_schema(fn: Any) -> None:
    assert build_output(fn, opaque=(Opaque,)) is None


def _returns_model() -> Point:
    return Point(x=1)


def _returns_typed_dict() -> Totals:
    return {"count": 1, "sum": 2.0}


def _returns_mapping() -> dict[str, int]:
    return {}


@pytest.mark.parametrize(("fn", "value", "data"), [
    (_returns_model, Point(x=1), {"x": 1, "y": 0}),
    (_returns_typed_dict, {"count": 1, "sum": 2}, {"count": 1, "sum": 2.0}),
    (_returns_mapping, {"a": 1}, {"a": 1}),
])
def test_object_results_are_their_own_output_schema(fn: Any, value: Any, data: Any) -> None:
    output = build_output(fn, opaque=(Opaque,))
    assert output is not None and output.wrapped is False
    assert output.schema["type"] == "object"
    assert output.structured(value) == data
    check(output.schema).validate(data)


def _returns_moment() -> datetime.datetime:
    return datetime.datetime(2026, 7, 28)


def _returns_maybe_number() -> int | None:
    return None


@pytest.mark.parametrize(("fn", "value", "data"), [
    (_returns_moment, datetime.datetime(2026, 7, 28, 9, 30), "2026-07-28T09:30:00"),
    (_returns_maybe_number, None, None),
    (_returns_maybe_number, 4, 4),
])
def test_other_results_are_wrapped_in_a_required_result_property(fn: Any, value: Any, data: Any) -> None:
    output = build_output(fn, opaque=(Opaque,))
    assert output is not None and output.wrapped is True
    assert output.schema["required"] == ["result"]
    assert output.structured(value) == {"result": data}
    check(output.schema).validate({"result": data})


def test_a_result_that_does_not_fit_the_annotation_is_refused() -> None:
    output = build_output(_returns_model, opaque=(Opaque,))
    assert output is not None
    with pytest.raises(pydantic.ValidationError):
        output.structured({"x": "not a number"})


def test_a_recursive_result_type_has_a_valid_output_schema() -> None:
    def grow() -> Node:
        return Node(name="root")

    output = build_output(grow, opaque=(Opaque,))
    assert output is not None
    data = output.structured(Node(name="a", children=[Node(name="b")]))
    check(output.schema).validate(data)


def test_a_return_type_without_a_schema_is_a_type_error_naming_the_tool() -> None:
    def odd() -> Ctx:
        return Ctx()

    with pytest.raises(TypeError, match="^Tool 'odd': its return type Ctx cannot be turned into JSON or described"):
        build_output(odd, opaque=(Opaque,))


# ---------------------------------------------------------------------- inline_defs


def test_a_schema_without_definitions_is_returned_as_it_is() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    assert inline_defs(schema) is schema


def test_references_are_replaced_through_chains_keeping_the_keys_beside_them() -> None:
    schema = {
        "type": "object",
        "properties": {"line": {"$ref": "#/$defs/Line", "description": "The line to draw."}},
        "$defs": {
            "Line": {"type": "object", "properties": {"start": {"$ref": "#/$defs/Point"}}},
            "Point": {"type": "object", "properties": {"x": {"type": "integer"}}},
        },
    }
    assert inline_defs(schema) == {
        "type": "object",
        "properties": {"line": {
            "type": "object",
            "description": "The line to draw.",
            "properties": {"start": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        }},
    }


def test_only_recursive_definitions_are_kept_and_their_bodies_are_inlined_too() -> None:
    schema = {
        "$ref": "#/$defs/Tree",
        "$defs": {
            "Tree": {"type": "object", "properties": {
                "leaf": {"$ref": "#/$defs/Leaf"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/Tree"}},
            }},
            "Leaf": {"type": "string"},
        },
    }
    result = inline_defs(schema)
    assert list(result["$defs"]) == ["Tree"]
    assert result["properties"]["leaf"] == {"type": "string"}
    assert result["$defs"]["Tree"]["properties"]["leaf"] == {"type": "string"}
    assert result["properties"]["children"]["items"] == {"$ref": "#/$defs/Tree"}
    check(result).validate({"leaf": "a", "children": [{"leaf": "b", "children": []}]})
