"""The options a tool, a resource, a view or a prompt takes, each written
once: the decorators (``@mcp.tool``...), the ``add_*`` methods and the value
objects' ``from_function`` all accept ``**options: Unpack[...]`` of these, so a
type checker sees every keyword and an option is added in one place."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from .apps import CSP, DomainSource

#: A completer: a function of the partial value (wrapped in
#: :class:`~flask_mcp.features.completions.Completer`), or a fixed list of
#: values offered by prefix.
CompleterSource = Callable[..., Any] | Sequence[str]


class ListingOptions(TypedDict, total=False):
    """What every listed feature takes (its entry in a ``*/list`` result and who sees it)."""

    #: Defaults to the function's name.
    name: str | None
    title: str | None
    #: Defaults to the function's docstring.
    description: str | None
    icons: Sequence[dict[str, Any]] | None
    #: The entry's ``_meta``.
    meta: dict[str, Any] | None
    #: What the caller's token must grant to see and use it (others get 403).
    scopes: Sequence[str] | None


class ToolOptions(ListingOptions, total=False):
    """``@mcp.tool(...)`` and ``mcp.add_tool(fn, ...)``."""

    #: ``readOnlyHint``, ``destructiveHint``...
    annotations: dict[str, Any] | None
    #: A raw JSON Schema replacing the one built from type hints (the tool then
    #: validates its arguments itself).
    input_schema: dict[str, Any] | None
    #: Calls per caller, e.g. ``"10/minute"``.
    rate_limit: str | None
    #: The ``ui://`` view (``@mcp.ui_resource``) hosts show with the results.
    ui: str | None
    #: Who may call it: ``["model", "app"]`` (default); needs ``ui``.
    visibility: Sequence[str] | None
    #: ``"optional"`` or ``"required"``: a 2026-07-28 call may/must run as a task.
    task: str | None
    #: ``"call"`` (default): the task begins with the call; ``"explicit"``: at ``ctx.start_task()``.
    task_start: str
    #: ``False``: a task whose queue worker died is failed instead of run again
    #: (``MCP_TASK_RUNNER = "celery"``; default ``True``: the tool is safe to repeat).
    task_rerun: bool
    #: ``True``: a 2025-11-25 / 2025-06-18 session's call runs on the task queue
    #: (``MCP_TASK_RUNNER = "celery"``) and its stream survives the web worker
    #: (docs/celery.md); task tools are durable unless ``False``.
    durable: bool | None


class PromptOptions(ListingOptions, total=False):
    """``@mcp.prompt(...)`` and ``mcp.add_prompt(fn, ...)``."""

    #: Completers of the prompt's arguments, by argument name.
    complete: Mapping[str, CompleterSource] | None


class ReadOptions(ListingOptions, total=False):
    """What a resource and a view both take."""

    annotations: dict[str, Any] | None
    #: Override ``MCP_CACHE_TTL_MS`` for reads of this resource.
    ttl_ms: int | None
    #: Override ``MCP_CACHE_SCOPE`` for reads of this resource.
    cache_scope: str | None


class ResourceOptions(ReadOptions, total=False):
    """``@mcp.resource(uri, ...)`` and ``mcp.add_resource(fn, uri, ...)``."""

    #: Defaults to a guess from the URI.
    mime_type: str | None
    size: int | None
    #: Completers of a template's variables, by variable name.
    complete: Mapping[str, CompleterSource] | None


class ViewOptions(ReadOptions, total=False):
    """``@mcp.ui_resource(uri, ...)``: an MCP Apps view."""

    #: Origins the view may reach.
    csp: CSP | Mapping[str, Sequence[str]] | None
    #: ``camera``, ``microphone``, ``geolocation``, ``clipboardWrite``.
    permissions: Iterable[str] | None
    #: The view's sandbox origin: ``"auto"`` (default), a string, a function of the URL, or ``None``.
    domain: DomainSource
    #: Whether the host draws a border around the view.
    prefers_border: bool | None


class SkillOptions(TypedDict, total=False):
    """``@mcp.skill(name, ...)`` and ``mcp.add_skill(fn, name=..., ...)``: a generated skill."""

    #: Defaults to the function's docstring.
    description: str | None
    #: Path segments before the skill's name in its ``skill://`` URIs.
    prefix: str | None
    #: Further front matter fields (``license``, ``metadata``...).
    frontmatter: Mapping[str, Any] | None
    #: What the caller's token must grant to see and read the skill.
    scopes: Sequence[str] | None
    #: Override ``MCP_CACHE_TTL_MS`` for reads of its files.
    ttl_ms: int | None
    #: Override ``MCP_CACHE_SCOPE`` for reads of its files.
    cache_scope: str | None


def check_options(what: str, options: Mapping[str, object], allowed: type) -> None:
    """Refuse a keyword ``allowed`` (one of the TypedDicts above) does not name,
    as a signature would: a misspelt option fails at decoration time."""
    known = allowed.__required_keys__ | allowed.__optional_keys__  # type: ignore[attr-defined]
    unknown = sorted(set(options) - known)
    if unknown:
        takes = ", ".join(sorted(known))
        raise TypeError(f"{what} got an unexpected keyword argument {unknown[0]!r} (it takes {takes})")
