"""Tools: the value object built at decoration time, and the registry."""

from __future__ import annotations

import inspect
import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Unpack

from flask import current_app
from pydantic_core import to_jsonable_python

from ..auth.ratelimit import parse_limit
from ..auth.scopes import permits, require_scopes, validate_scopes
from ..context import Context, current_request_var
from ..coroutines import synced
from ..errors import ToolError
from ..protocol.errors import MCPError
from ..protocol.headers import HeaderParam, collect_header_params
from ..protocol.request_info import InvalidToolArguments, RequestInfo, ToolOutcome
from ..protocol.task_methods import TASK_STARTS, TASK_SUPPORT
from .apps import tool_meta
from .content import Content, ToolResult
from .options import ToolOptions, check_options
from .registry import NamedRegistry
from .schema import InputSpec, OutputSpec, build_input, build_output, describe

logger = logging.getLogger("flask_mcp")

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")


@dataclass
class Tool:
    """One registered tool: its definition and how to call it."""

    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    input: InputSpec | None
    output: OutputSpec | None
    header_params: tuple[HeaderParam, ...] = field(default=())
    #: Scopes the caller's token must grant (``@mcp.tool(scopes=[...])``).
    scopes: tuple[str, ...] = ()
    #: Per-caller call limits (``@mcp.tool(rate_limit="10/minute")``), parsed.
    rate_limit: tuple[Any, ...] = ()
    #: ``"optional"``/``"required"``: calls may/must run as tasks (``@mcp.tool(task=...)``).
    task_support: str | None = None
    #: ``"call"``: the task begins with the call; ``"explicit"``: at ``ctx.start_task()``.
    task_start: str = "call"
    #: Whether a task queue may run it again when its worker dies (``@mcp.tool(task_rerun=False)``: no).
    task_rerun: bool = True
    #: ``@mcp.tool(durable=...)``: a legacy session's call runs on the task queue
    #: (docs/celery.md); ``None``: as its task support says (task tools are durable).
    durable_option: bool | None = None
    #: ``fn`` as a call runs it (an ``async def`` through the app's ``ensure_sync``).
    call: Callable[..., Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.call = synced(self.fn, f"Tool {self.name!r}")

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Unpack[ToolOptions]) -> Tool:
        """The tool ``fn`` becomes with ``options`` (see :class:`~flask_mcp.features.options.ToolOptions`)."""
        check_options("tool()", options, ToolOptions)
        tool_name = options.get("name") or fn.__name__
        if not _NAME.match(tool_name):
            raise ValueError(
                f"Invalid tool name {tool_name!r}: use 1-128 letters, digits, '_', '-' or '.'"
            )
        required = validate_scopes(options.get("scopes"), f"Tool {tool_name!r}")
        rate_limit = options.get("rate_limit")
        limits = parse_limit(rate_limit, f"Tool {tool_name!r}") if rate_limit is not None else ()
        task = options.get("task")
        task_start = options.get("task_start", "call")
        if task is not None and task not in TASK_SUPPORT:
            raise ValueError(f"Tool {tool_name!r}: task= must be one of {TASK_SUPPORT} or None (got {task!r})")
        if task_start not in TASK_STARTS:
            raise ValueError(f"Tool {tool_name!r}: task_start= must be one of {TASK_STARTS} (got {task_start!r})")
        ui, visibility, meta = options.get("ui"), options.get("visibility"), options.get("meta")
        if ui is not None:
            meta = tool_meta(ui, visibility, meta)
        elif visibility is not None:
            raise ValueError("visibility= applies to a tool with a view: give ui= too")
        title, description = options.get("title"), options.get("description")
        annotations, icons, input_schema = options.get("annotations"), options.get("icons"), options.get("input_schema")
        summary, _ = describe(fn)
        if input_schema is not None:
            if input_schema.get("type") != "object":
                raise ValueError(f"Tool {tool_name!r}: input_schema must have \"type\": \"object\"")
            spec = None
            schema = input_schema
        else:
            spec = build_input(fn, context_type=Context, tool_name=tool_name, warn_unannotated=True)
            schema = spec.schema
        output = build_output(fn, opaque=(Content, ToolResult))
        definition: dict[str, Any] = {"name": tool_name}
        if title:
            definition["title"] = title
        definition["description"] = description or summary or tool_name
        definition["inputSchema"] = schema
        if output is not None:
            definition["outputSchema"] = output.schema
        if annotations:
            definition["annotations"] = dict(annotations)
        if icons:
            definition["icons"] = [dict(icon) for icon in icons]
        if meta:
            definition["_meta"] = dict(meta)
        try:
            header_params = collect_header_params(schema)
        except ValueError as exc:
            raise ValueError(f"Tool {tool_name!r}: {exc}") from None
        task_rerun = bool(options.get("task_rerun", True))
        durable = options.get("durable")
        if durable is not None and not isinstance(durable, bool):
            raise ValueError(f"Tool {tool_name!r}: durable= must be True, False or None (got {durable!r})")
        return cls(
            tool_name, fn, definition, spec, output, header_params, required, limits, task, task_start, task_rerun,
            durable,
        )

    @property
    def durable(self) -> bool:
        """Whether a legacy session's call of this tool runs on the task queue
        (``MCP_TASK_RUNNER = "celery"``) with a resumable stream."""
        return self.task_support is not None if self.durable_option is None else self.durable_option

    def visible_to(self, request: RequestInfo) -> bool:
        return permits(self.scopes, request)

    def invoke(self, arguments: dict[str, Any], request: RequestInfo) -> ToolOutcome:
        resumed = request.task is not None and request.task.resumed  # a queue worker: checked when accepted
        if self.scopes and not resumed:
            require_scopes(self.scopes, request, f"Tool {self.name!r}")  # 403 insufficient_scope
        if self.rate_limit and not resumed:
            current_app.extensions["mcp"].rate_limits.hit_tool(self.name, self.rate_limit, request)  # 429
        kwargs = self.input.validate(arguments) if self.input is not None else self._arguments(arguments)
        if self.input is not None and self.input.context_param:
            kwargs[self.input.context_param] = Context(request)
        if request.task is not None and self.task_start == "call":
            request.task.start()  # the client gets its task now; the call goes on in the background
        token = current_request_var.set(request)  # what ``with serving(request)`` does, without its calls
        try:
            value = self.call(**kwargs)
        except ToolError as exc:
            return ToolOutcome([{"type": "text", "text": exc.message}], is_error=True)
        except MCPError:
            raise
        except Exception:
            logger.exception("Tool %r raised", self.name)
            return _failure(f"Tool {self.name!r} failed with an internal error.")
        finally:
            current_request_var.reset(token)
        if type(value) is str and self.output is None:  # the commonest tool: text in, text out
            return ToolOutcome([{"type": "text", "text": value}])
        return self._convert(value)

    def _arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Arguments for a tool declared with its own ``input_schema`` (no model to validate with)."""
        try:
            inspect.signature(self.fn).bind(**arguments)
        except TypeError as exc:
            raise InvalidToolArguments(f"Invalid arguments for tool {self.name!r}: {exc}") from None
        return dict(arguments)

    def _convert(self, value: Any) -> ToolOutcome:
        if isinstance(value, ToolResult):
            return ToolOutcome(
                [_block(item) for item in value.content],
                structured=value.structured if value.has_structured else None,
                has_structured=value.has_structured,
                is_error=value.is_error,
                meta=value.meta,
            )
        if self.output is None:
            return ToolOutcome(_blocks(value))
        try:
            structured = self.output.structured(value)
        except Exception:
            logger.exception("Tool %r returned a value that does not fit its return annotation", self.name)
            return _failure(f"Tool {self.name!r} returned a malformed result.")
        shown = structured["result"] if self.output.wrapped else structured
        return ToolOutcome([_text(_json(shown))], structured=structured, has_structured=True)


def _failure(message: str) -> ToolOutcome:
    return ToolOutcome([_text(message)], is_error=True)


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _block(item: Any) -> dict[str, Any]:
    if isinstance(item, Content):
        return item.to_block()
    if isinstance(item, str):
        return _text(item)
    return _text(_json(to_jsonable_python(item)))


def _blocks(value: Any) -> list[dict[str, Any]]:
    """Content for a tool without an output schema."""
    if value is None:
        return []
    if isinstance(value, (str, Content)):
        return [_block(value)]
    if isinstance(value, (list, tuple)) and any(isinstance(v, Content) for v in value):
        return [_block(item) for item in value]
    return [_text(_json(to_jsonable_python(value)))]


class ToolRegistry(NamedRegistry[Tool]):
    """The tools of one :class:`~flask_mcp.MCP`, in registration order."""

    def __init__(self) -> None:
        super().__init__("tools", "tool")
