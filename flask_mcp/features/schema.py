"""A tool's JSON Schemas and argument validation, from its signature.

pydantic does the type-to-schema work and the validation; this module only
decides which parameters count, where descriptions come from, and tidies the
schema for MCP clients (``$defs`` inlined, no generated titles).
"""

from __future__ import annotations

import inspect
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, NotRequired, Required, get_args, get_origin, get_type_hints

import pydantic
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import PydanticSerializationError, to_jsonable_python
from typing_extensions import TypedDict

from ..protocol.request_info import InvalidToolArguments

_TYPED_DICT: Any = TypedDict  # called with a computed name and fields


def Header(name: str) -> Any:  # noqa: N802 - reads as a type marker: Annotated[str, Header("Region")]
    """Mark a tool parameter to be mirrored in the ``Mcp-Param-{name}`` request header."""
    return pydantic.Field(json_schema_extra={"x-mcp-header": name})


class _TidySchema(GenerateJsonSchema):
    """pydantic's generator without the titles it invents from Python names."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def typed_dict_schema(self, schema: Any) -> Any:
        result = super().typed_dict_schema(schema)
        result.pop("title", None)
        return result


@dataclass(frozen=True)
class InputSpec:
    """How to turn ``tools/call`` arguments into keyword arguments."""

    schema: dict[str, Any]
    context_param: str | None
    validate: Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class OutputSpec:
    """The declared result type: its ``outputSchema`` and how to serialize a value."""

    schema: dict[str, Any]
    wrapped: bool
    adapter: pydantic.TypeAdapter[Any]

    def structured(self, value: Any) -> Any:
        """Validate a return value against the declared type and make it JSON."""
        checked = self.adapter.validate_python(value)
        data = self.adapter.dump_python(checked, mode="json")
        return {"result": data} if self.wrapped else data


def describe(fn: Callable[..., Any]) -> tuple[str | None, dict[str, str]]:
    """The summary of a docstring and the per-parameter descriptions it gives
    (Google ``Args:`` sections and Sphinx ``:param x:`` lines)."""
    doc = inspect.getdoc(fn)
    if not doc:
        return None, {}
    params: dict[str, str] = {}
    summary: list[str] = []
    section: str | None = None
    current: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        sphinx = re.match(r":param\s+(?:[^:]*\s)?(\w+):\s*(.*)", stripped)
        if sphinx:
            current, section = sphinx.group(1), "sphinx"
            params[current] = sphinx.group(2)
            continue
        if re.match(r"^(Args|Arguments|Parameters|Params):\s*$", stripped):
            section, current = "args", None
            continue
        if re.match(r"^(Returns?|Raises|Yields|Examples?|Notes?):\s*$", stripped) or stripped.startswith(":"):
            section, current = "other", None
            continue
        if section == "args":
            entry = re.match(r"^(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$", stripped)
            if entry and not line.startswith(" " * 8):
                current = entry.group(1)
                params[current] = entry.group(2)
            elif current and stripped:
                params[current] = f"{params[current]} {stripped}".strip()
            continue
        if section == "sphinx" and current and stripped:
            params[current] = f"{params[current]} {stripped}".strip()
            continue
        if section is None:
            summary.append(line)
    text = "\n".join(summary).strip()
    return (text or None), params


def build_input(
    fn: Callable[..., Any], *, context_type: type, tool_name: str, warn_unannotated: bool = False
) -> InputSpec:
    """The input schema and validator of a tool function. ``warn_unannotated``
    (tools): a parameter without a type hint gets a ``UserWarning``, as it
    accepts any JSON and tells the model nothing (prompt arguments and URI
    template variables are strings anyway)."""
    signature = inspect.signature(fn)
    hints = _hints(fn)
    _, param_docs = describe(fn)
    fields: dict[str, Any] = {}
    defaults: dict[str, Any] = {}
    context_param: str | None = None
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise TypeError(
                f"Tool {tool_name!r}: parameter {param.name!r} is {param.kind.description}; "
                "tool arguments arrive by name, so use ordinary named parameters."
            )
        annotation = hints.get(param.name, Any)
        if _is_context(annotation, context_type):
            context_param = param.name
            continue
        if warn_unannotated and param.name not in hints:
            warn_at_caller(
                f"Tool {tool_name!r}: parameter {param.name!r} has no type annotation, so any JSON value is "
                f"accepted and its input schema tells the model nothing about it; annotate it ({param.name}: "
                f"str, int, a pydantic model...), or {param.name}: Any to accept anything on purpose"
            )
        doc = param_docs.get(param.name)
        if doc and not _has_description(annotation):
            annotation = Annotated[annotation, pydantic.Field(description=doc)]
        if param.default is param.empty:
            fields[param.name] = Required[annotation]
        else:
            fields[param.name] = NotRequired[annotation]
            defaults[param.name] = param.default
    # Built at run time from the signature; pydantic validates it like any TypedDict.
    arguments_type = _TYPED_DICT(f"{tool_name}_arguments", fields)
    arguments_type.__pydantic_config__ = pydantic.ConfigDict(extra="forbid")
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(arguments_type)
        schema = adapter.json_schema(schema_generator=_TidySchema)
    except pydantic.PydanticUserError as exc:  # PydanticSchemaGenerationError among them
        raise TypeError(_unsupported(tool_name, fields, exc)) from None
    schema = inline_defs(schema)
    _add_defaults(schema, defaults)
    schema.setdefault("properties", {})

    validator = adapter.validator  # built above (json_schema); skips TypeAdapter's per-call wrapper

    def validate(arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            # A new plain dict (pydantic builds one for a TypedDict): the caller may add to it.
            validated: dict[str, Any] = validator.validate_python(arguments)
            return validated
        except pydantic.ValidationError as exc:
            raise _arguments_error(tool_name, exc) from None

    return InputSpec(schema, context_param, validate)


def build_output(fn: Callable[..., Any], *, opaque: tuple[type, ...]) -> OutputSpec | None:
    """The output schema of a tool, from its return annotation.

    No schema for text-like or content results (``str``, ``None``, content
    helpers, no annotation); a non-object type is wrapped as ``{"result": ...}``.
    """
    annotation = _hints(fn).get("return", inspect.Signature.empty)
    if annotation in (inspect.Signature.empty, None, type(None), str, Any) or _mentions(annotation, opaque):
        return None
    try:
        adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(annotation)
        schema = inline_defs(adapter.json_schema(mode="serialization", schema_generator=_TidySchema))
    except pydantic.PydanticUserError as exc:
        if not _is_type_error(exc):
            raise TypeError(f"Tool {fn.__name__!r}: unsupported return type: {exc}") from None
        raise TypeError(
            f"Tool {fn.__name__!r}: its return type {_type_name(annotation)} cannot be turned into JSON or "
            f"described by a JSON Schema. {_USE_INSTEAD}, or return a str (or content such as Text, Image)"
        ) from None
    if schema.get("type") == "object":
        return OutputSpec(schema, False, adapter)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    return OutputSpec(wrapped, True, adapter)


def inline_defs(schema: dict[str, Any]) -> dict[str, Any]:
    """Replace local ``$ref``s into ``$defs`` by the definitions themselves.

    Recursive definitions cannot be inlined; they keep a ``$defs`` entry."""
    defs = schema.get("$defs")
    if not defs:
        return schema
    kept: dict[str, Any] = {}

    def resolve(node: Any, trail: tuple[str, ...]) -> Any:
        if isinstance(node, list):
            return [resolve(item, trail) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            name = ref[len("#/$defs/"):]
            if name in trail:
                kept[name] = defs[name]
                return node
            target = resolve(defs[name], trail + (name,))
            extra = {k: resolve(v, trail) for k, v in node.items() if k != "$ref"}
            return {**target, **extra}
        return {k: resolve(v, trail) for k, v in node.items() if k != "$defs"}

    result: dict[str, Any] = resolve(schema, ())
    if kept:
        result["$defs"] = {name: resolve(body, (name,)) for name, body in kept.items()}
    return result


#: What a tool's parameter or result may be instead of an arbitrary class.
_USE_INSTEAD = (
    "Use a type made of JSON: str, int, float, bool, None, list, dict, a Literal or an Enum, a "
    "pydantic BaseModel, a dataclass or a TypedDict of those"
)


def _unsupported(tool_name: str, fields: dict[str, Any], exc: pydantic.PydanticUserError) -> str:
    """flask-mcp's own message for a parameter type pydantic cannot build a schema
    for (pydantic's own speaks of ``arbitrary_types_allowed``, which does not apply:
    the arguments arrive as JSON). Names the first parameter that fails alone."""
    if _is_type_error(exc):
        for name, field_type in fields.items():
            annotation = get_args(field_type)[0]  # Required[...] / NotRequired[...]
            try:
                pydantic.TypeAdapter(annotation).json_schema()
            except pydantic.PydanticUserError:
                return (
                    f"Tool {tool_name!r}: parameter {name!r} has type {_type_name(annotation)}, which arguments "
                    f"sent as JSON cannot be validated into and no JSON Schema can describe. {_USE_INSTEAD}; "
                    "for an object the app looks up (a database row...), take its id and look it up in the tool"
                )
    return f"Tool {tool_name!r}: unsupported parameter types: {exc}"


def _is_type_error(exc: pydantic.PydanticUserError) -> bool:
    """A type pydantic has no schema for (not, say, a misused Field)."""
    return isinstance(exc, pydantic.errors.PydanticSchemaGenerationError) or exc.code in (
        "schema-for-unknown-type", "invalid-for-json-schema")


def _type_name(annotation: Any) -> str:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if isinstance(annotation, type) and not get_args(annotation):
        return annotation.__qualname__
    return repr(annotation).replace("typing.", "")


def warn_at_caller(message: str) -> None:
    """A ``UserWarning`` pointing at the app's own line (the decorator or the
    ``add_*`` call), not at flask-mcp's frames."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    level, frame = 1, inspect.currentframe()
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(fn, include_extras=True)
    except Exception as exc:
        raise TypeError(f"Cannot read the type hints of {fn.__name__!r}: {exc}") from None


def _is_context(annotation: Any, context_type: type) -> bool:
    if get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return isinstance(annotation, type) and issubclass(annotation, context_type)


def _has_description(annotation: Any) -> bool:
    if get_origin(annotation) is not Annotated:
        return False
    return any(getattr(m, "description", None) for m in get_args(annotation)[1:])


def _mentions(annotation: Any, opaque: tuple[type, ...]) -> bool:
    """Whether a return type is (or contains) content that has no schema."""
    if isinstance(annotation, type) and issubclass(annotation, opaque):
        return True
    return any(_mentions(arg, opaque) for arg in get_args(annotation))


def _add_defaults(schema: dict[str, Any], defaults: dict[str, Any]) -> None:
    properties = schema.get("properties", {})
    for name, value in defaults.items():
        if name in properties and "default" not in properties[name]:
            try:
                properties[name]["default"] = to_jsonable_python(value)
            except PydanticSerializationError:
                pass


def _arguments_error(tool_name: str, exc: pydantic.ValidationError) -> InvalidToolArguments:
    details = []
    lines = []
    for error in exc.errors(include_url=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
        message = error["msg"]
        if error["type"] == "missing":
            message = "required argument is missing"
        elif error["type"] == "extra_forbidden":
            message = "unexpected argument"
        details.append({"field": where, "message": message})
        lines.append(f"{where}: {message}")
    summary = "; ".join(lines)
    return InvalidToolArguments(f"Invalid arguments for tool {tool_name!r}: {summary}", details)
