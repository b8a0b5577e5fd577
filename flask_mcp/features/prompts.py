"""Prompts: the value object built at decoration time (arguments from the
signature), what a prompt function's return value becomes, and the registry."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Unpack

from ..auth.scopes import permits, require_scopes, validate_scopes
from ..context import Context, serving
from ..coroutines import synced
from ..errors import ToolError
from ..protocol.errors import InternalError, InvalidParams, MCPError
from ..protocol.providers import PromptOutcome
from ..protocol.request_info import InvalidToolArguments, RequestInfo
from .content import Message, as_block
from .options import PromptOptions, check_options
from .registry import NamedRegistry
from .schema import InputSpec, build_input, describe

logger = logging.getLogger("flask_mcp")

_NAME = re.compile(r"^[A-Za-z0-9_.\-]{1,128}$")
_ROLES = ("user", "assistant")



@dataclass
class Prompt:
    """One registered prompt: its definition and how to render it."""

    name: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    input: InputSpec
    #: Scopes the caller's token must grant (``@mcp.prompt(scopes=[...])``).
    scopes: tuple[str, ...] = ()
    #: ``fn`` as a request runs it (an ``async def`` through the app's ``ensure_sync``).
    call: Callable[..., Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.call = synced(self.fn, f"Prompt {self.name!r}")

    @classmethod
    def from_function(cls, fn: Callable[..., Any], **options: Unpack[PromptOptions]) -> Prompt:
        """The prompt ``fn`` becomes with ``options`` (``complete`` is the registry's business)."""
        check_options("prompt()", options, PromptOptions)
        name, title, description = options.get("name"), options.get("title"), options.get("description")
        icons, meta, scopes = options.get("icons"), options.get("meta"), options.get("scopes")
        prompt_name = name or fn.__name__
        if not _NAME.match(prompt_name):
            raise ValueError(f"Invalid prompt name {prompt_name!r}: use 1-128 letters, digits, '_', '-' or '.'")
        required = validate_scopes(scopes, f"Prompt {prompt_name!r}")
        try:
            spec = build_input(fn, context_type=Context, tool_name=prompt_name)
        except TypeError as exc:
            raise TypeError(str(exc).replace("Tool ", "Prompt ", 1)) from None
        summary, _ = describe(fn)
        definition: dict[str, Any] = {"name": prompt_name}
        if title:
            definition["title"] = title
        definition["description"] = description or summary or prompt_name
        arguments = _arguments(spec.schema)
        if arguments:
            definition["arguments"] = arguments
        if icons:
            definition["icons"] = [dict(icon) for icon in icons]
        if meta:
            definition["_meta"] = dict(meta)
        return cls(prompt_name, fn, definition, spec, required)

    @property
    def label(self) -> str:
        """How a 403 names it, so the person reading it knows what needed the scope."""
        return f"Prompt {self.name!r}"

    def visible_to(self, request: RequestInfo) -> bool:
        """Whether ``prompts/list`` shows it to this caller: only what it may get."""
        return permits(self.scopes, request)

    @property
    def argument_names(self) -> tuple[str, ...]:
        return tuple(arg["name"] for arg in self.definition.get("arguments", ()))

    def render(self, arguments: dict[str, Any], request: RequestInfo) -> PromptOutcome:
        require_scopes(self.scopes, request, self.label)  # 403 before arguments are even checked
        try:
            kwargs = self.input.validate(arguments)
        except InvalidToolArguments as exc:
            problems = "; ".join(f"{d['field']}: {d['message']}" for d in exc.details) or exc.message
            raise InvalidParams(
                f"Invalid arguments for prompt {self.name!r}: {problems}", data={"errors": exc.details}
            ) from None
        if self.input.context_param:
            kwargs[self.input.context_param] = Context(request)
        try:
            with serving(request):
                value = self.call(**kwargs)
            messages = to_messages(value)
        except MCPError:
            raise
        except ToolError as exc:
            raise InternalError(exc.message) from None
        except Exception:
            logger.exception("Prompt %r raised", self.name)
            raise InternalError(f"Prompt {self.name!r} failed with an internal error.") from None
        return PromptOutcome(messages, self.definition.get("description"))


def _arguments(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """``PromptArgument`` entries from the input schema (strings on the wire;
    typed parameters are coerced from them)."""
    required = set(schema.get("required", []))
    arguments = []
    for name, prop in schema.get("properties", {}).items():
        argument: dict[str, Any] = {"name": name}
        if isinstance(prop.get("title"), str):
            argument["title"] = prop["title"]
        if isinstance(prop.get("description"), str):
            argument["description"] = prop["description"]
        argument["required"] = name in required
        arguments.append(argument)
    return arguments


def to_messages(value: Any) -> list[dict[str, Any]]:
    """A prompt function's return value as messages: a string is one user text
    message; a content helper one user message; a :class:`~flask_mcp.Message`
    (``UserMessage``, ``AssistantMessage``) or a ``{"role", "content"}`` dict is
    itself; a list gives one message per item."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [_message(item) for item in items]


def _message(item: Any) -> dict[str, Any]:
    if isinstance(item, Message):
        return item.to_message()
    if isinstance(item, dict) and "role" in item:
        if item["role"] not in _ROLES or "content" not in item:
            raise ValueError(f"A prompt message needs role 'user' or 'assistant' and a content (got {item!r})")
        return {"role": item["role"], "content": as_block(item["content"])}
    return {"role": "user", "content": as_block(item)}  # text, a content helper or block, JSON


class PromptRegistry(NamedRegistry[Prompt]):
    """The prompts of one :class:`~flask_mcp.MCP`, in registration order.
    ``on_list_changed`` callbacks hear every change."""

    def __init__(self) -> None:
        super().__init__("prompts", "prompt")
