"""Completions: suggestions for the arguments of prompts and resource
templates (``completion/complete``), from functions or fixed lists."""

from __future__ import annotations

import inspect
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_type_hints

from ..auth.scopes import require_scopes
from ..context import Context, serving
from ..coroutines import synced
from ..errors import ToolError
from ..protocol.errors import InternalError, InvalidParams, MCPError
from ..protocol.providers import CompletionOutcome
from ..protocol.request_info import RequestInfo
from .options import CompleterSource
from .prompts import PromptRegistry
from .resources import ResourceRegistry

logger = logging.getLogger("flask_mcp")

RefType = Literal["ref/prompt", "ref/resource"]

@dataclass(frozen=True)
class Completion:
    """What a completer may return instead of a plain list: the values (at most
    100 are sent), and optionally how many there are in all and whether more exist."""

    values: Sequence[str]
    total: int | None = None
    has_more: bool | None = None


class Completer:
    """One argument's completer, called with what its signature asks for."""

    def __init__(self, source: CompleterSource, label: str) -> None:
        self.label = label
        if isinstance(source, str) or not (callable(source) or isinstance(source, (list, tuple))):
            raise TypeError(f"{label}: a completer is a function or a list of values (got {source!r})")
        if not callable(source):
            if not all(isinstance(v, str) for v in source):
                raise TypeError(f"{label}: completion values must be strings")
            self._fixed: tuple[str, ...] | None = tuple(source)
            self._fn: Callable[..., Any] | None = None
            self._plan: dict[str, str] = {}
            return
        self._fixed = None
        self._fn = synced(source, label)
        self._plan = _plan(source, label)

    def __call__(self, value: str, arguments: dict[str, str], request: RequestInfo) -> CompletionOutcome:
        if self._fixed is not None:
            wanted = value.casefold()
            return CompletionOutcome([v for v in self._fixed if v.casefold().startswith(wanted)])
        assert self._fn is not None
        given = {"value": value, "arguments": dict(arguments), "context": Context(request)}
        kwargs = {param: given[role] for param, role in self._plan.items()}
        try:
            with serving(request):
                result = self._fn(**kwargs)
        except MCPError:
            raise
        except ToolError as exc:
            raise InternalError(exc.message) from None
        except Exception:
            logger.exception("Completer for %s raised", self.label)
            raise InternalError(f"Completing {self.label} failed with an internal error.") from None
        return _outcome(result, self.label)


def _plan(fn: Callable[..., Any], label: str) -> dict[str, str]:
    """Which parameter gets what: one annotated ``Context`` gets the context; one
    named ``arguments`` the other arguments' values so far; the first other one
    the partial value."""
    try:
        hints = get_type_hints(fn)
    except Exception:
        hints = {}
    plan: dict[str, str] = {}
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(param.name)
        if isinstance(hint, type) and issubclass(hint, Context):
            plan[param.name] = "context"
        elif param.name == "arguments":
            plan[param.name] = "arguments"
        elif "value" not in plan.values():
            plan[param.name] = "value"
        elif param.default is param.empty:
            raise TypeError(
                f"{label}: a completer takes the partial value, and optionally `arguments` "
                f"(the other arguments so far) and a Context; {param.name!r} is none of them"
            )
    return plan


def _outcome(result: Any, label: str) -> CompletionOutcome:
    if result is None:
        return CompletionOutcome([])
    if isinstance(result, Completion):
        return CompletionOutcome(list(result.values), result.total, result.has_more)
    if isinstance(result, str) or not isinstance(result, Iterable):
        logger.error("Completer for %s returned %r, not a list of strings", label, type(result).__name__)
        raise InternalError(f"Completing {label} failed with an internal error.")
    return CompletionOutcome([str(v) for v in result])


class CompletionRegistry:
    """The completers of one :class:`~flask_mcp.MCP`, per prompt or template
    argument; it answers for prompts and templates it does not know with ``-32602``."""

    def __init__(self, prompts: PromptRegistry, resources: ResourceRegistry) -> None:
        self._prompts = prompts
        self._resources = resources
        self._completers: dict[tuple[str, str, str], Completer] = {}
        self._lock = threading.Lock()
        #: Called after every addition (the ``completions`` capability may appear).
        self.on_change: list[Callable[[], None]] = []

    def add(self, ref_type: RefType, target: str, argument: str, source: CompleterSource) -> None:
        """Complete ``argument`` of the prompt named ``target`` (``ref/prompt``) or
        of the resource template ``target`` (``ref/resource``)."""
        kind = "prompt" if ref_type == "ref/prompt" else "resource template"
        completer = Completer(source, f"argument {argument!r} of {kind} {target!r}")
        with self._lock:
            self._completers[(ref_type, target, argument)] = completer
        for callback in list(self.on_change):
            callback()

    def __len__(self) -> int:
        return len(self._completers)

    def complete(
        self, ref: dict[str, Any], argument: str, value: str, context: dict[str, str], request: RequestInfo
    ) -> CompletionOutcome:
        ref_type = ref["type"]
        target = ref["name"] if ref_type == "ref/prompt" else ref["uri"]
        if argument not in self._arguments(ref_type, target, request):
            raise InvalidParams(f"The {_describe(ref_type, target)} has no argument {argument!r}.")
        completer = self._completers.get((ref_type, target, argument))
        if completer is None:
            return CompletionOutcome([])
        return completer(value, context, request)

    def _arguments(self, ref_type: str, target: str, request: RequestInfo) -> tuple[str, ...]:
        """The target's argument names, once the caller may use it: suggestions
        can reveal what the prompt or template guards, so its scopes apply (403)."""
        if ref_type == "ref/prompt":
            prompt = self._prompts.find(target)
            if prompt is None:
                raise InvalidParams(f"Unknown prompt {target!r}: call prompts/list for the prompts this server offers.")
            require_scopes(prompt.scopes, request, prompt.label)
            return prompt.argument_names
        resource = self._resources.get(target)
        if resource is None or resource.template is None:
            raise InvalidParams(
                f"Unknown resource template {target!r}: call resources/templates/list for the templates "
                "this server offers."
            )
        require_scopes(resource.scopes, request, resource.label)
        return resource.template.variables


def _describe(ref_type: str, target: str) -> str:
    return f"prompt {target!r}" if ref_type == "ref/prompt" else f"resource template {target!r}"
