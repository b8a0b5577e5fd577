"""The resources, prompts, completions and MCP Apps half of the extension's
API, a mixin of :class:`~flask_mcp.MCP` (whose ``__init__`` sets it up):
decorators that register plain functions and return them unchanged, and their
run-time counterparts. Their options are :mod:`flask_mcp.features.options`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar, Unpack, cast, overload

from .apps import UI_MIME_TYPE, UIOptions
from .completions import Completer, CompletionRegistry, RefType
from .options import CompleterSource, PromptOptions, ResourceOptions, ViewOptions, check_options
from .prompts import Prompt, PromptRegistry
from .resources import Resource, ResourceRegistry

F = TypeVar("F", bound=Callable[..., Any])

#: The options of a view that are not options of the resource serving it.
_VIEW_ONLY = frozenset(ViewOptions.__optional_keys__ - ResourceOptions.__optional_keys__)


class ResourcesAndPromptsMixin:
    """Registration of resources, resource templates, prompts, completers and views."""

    def __init__(self, on_list_changed: Callable[[str], None], on_completions: Callable[[], None]) -> None:
        """Create the registries; ``on_list_changed(kind)`` hears every change of
        the resource or prompt lists ("resources", "prompts"), ``on_completions()``
        every completer added."""
        self._resources = ResourceRegistry()
        self._prompts = PromptRegistry()
        self._completions = CompletionRegistry(self._prompts, self._resources)
        self._resources.on_list_changed.append(on_list_changed)
        self._prompts.on_list_changed.append(on_list_changed)
        self._completions.on_change.append(on_completions)

    @property
    def resources(self) -> ResourceRegistry:
        return self._resources

    @property
    def prompts(self) -> PromptRegistry:
        return self._prompts

    @property
    def completions(self) -> CompletionRegistry:
        return self._completions

    # ------------------------------------------------------------------ resources

    def resource(self, uri: str, **options: Unpack[ResourceOptions]) -> Callable[[F], F]:
        """Register a function as the resource at ``uri``, or as a resource
        template when ``uri`` is an RFC 6570 template (``"app://items/{id}"``):
        its variables become the function's parameters, coerced to their type
        hints. The function returns ``str`` (text), ``bytes`` (a blob), contents
        helpers, or any JSON-able value; ``None`` means "no such resource".

        ``name`` defaults to the function's name, ``description`` to its
        docstring, ``mime_type`` to a guess from the URI. ``ttl_ms`` and
        ``cache_scope`` override ``MCP_CACHE_TTL_MS``/``MCP_CACHE_SCOPE`` for
        reads; ``complete`` maps template variables to completers. ``scopes``:
        what the caller's token must grant to see, read or complete it (as for tools).
        """
        check_options("resource()", options, ResourceOptions)

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    def add_resource(self, fn: Callable[..., Any], uri: str, **options: Unpack[ResourceOptions]) -> None:
        """Register a resource or template at any time (options as for :meth:`resource`)."""
        self._add_resource(fn, uri, None, options)

    def _add_resource(self, fn: Callable[..., Any], uri: str, ui: UIOptions | None, options: ResourceOptions) -> None:
        complete = options.pop("complete", None)
        resource = Resource.from_function(fn, uri, ui=ui, **options)
        completers = self._completers("ref/resource", uri, resource.template.variables if resource.template else (),
                                      complete)
        self._resources.add(resource)
        for argument, source in completers.items():
            self._completions.add("ref/resource", uri, argument, source)

    def remove_resource(self, uri: str) -> None:
        """Remove the resource (or template) registered at ``uri``."""
        self._resources.remove(uri)

    def ui_resource(self, uri: str, **options: Unpack[ViewOptions]) -> Callable[[F], F]:
        """Register an MCP Apps view: a ``ui://`` resource whose function returns a
        complete HTML document, served as ``text/html;profile=mcp-app`` with
        ``_meta.ui`` on its listing entry and contents. Link a tool to it with
        ``@mcp.tool(ui=uri)``.

        ``csp``: origins the view may reach (:class:`~flask_mcp.features.apps.CSP` or a dict
        with ``connectDomains``, ``resourceDomains``, ``frameDomains``,
        ``baseUriDomains``); ``permissions``: ``camera``, ``microphone``,
        ``geolocation``, ``clipboardWrite``; ``domain``: the view's stable sandbox
        origin -- ``"auto"`` derives Claude's from the URL each request reached
        the server at, a string is used as is, a function gets that URL, ``None``
        leaves it to the host; ``prefers_border``: whether the host draws a border;
        ``scopes``: what the caller's token must grant (as for :meth:`resource`).
        """
        check_options("ui_resource()", options, ViewOptions)
        if not uri.startswith("ui://"):
            raise ValueError(f"An MCP Apps view needs a ui:// URI (got {uri!r})")
        ui = UIOptions.build(
            csp=options.get("csp"),
            permissions=options.get("permissions"),
            domain=options.get("domain", "auto"),
            prefers_border=options.get("prefers_border"),
        )
        # What is left is what any resource takes (ReadOptions), served as an MCP App.
        listing = {key: value for key, value in options.items() if key not in _VIEW_ONLY}
        listing["mime_type"] = UI_MIME_TYPE

        def register(fn: F) -> F:
            self._add_resource(fn, uri, ui, cast(ResourceOptions, dict(listing)))
            return fn

        return register

    # ------------------------------------------------------------------ prompts

    @overload
    def prompt(self, fn: F) -> F: ...

    @overload
    def prompt(self, fn: str | None = None, **options: Unpack[PromptOptions]) -> Callable[[F], F]: ...

    def prompt(self, fn: Callable[..., Any] | str | None = None, **options: Unpack[PromptOptions]) -> Any:
        """Register a function as a prompt; the function is returned unchanged.

        Bare (``@mcp.prompt``), with a name (``@mcp.prompt("review")``) or
        options. Its parameters are the prompt's arguments (required when they
        have no default; descriptions from ``Annotated[..., Field(description=...)]``
        or the docstring's ``Args:``); values arrive as strings and are coerced
        to the type hints. It returns a string (one user message), a content
        helper, ``UserMessage``/``AssistantMessage`` objects, ``{"role", "content"}``
        dicts, or a list of those. ``complete`` maps arguments to completers.
        ``scopes``: what the caller's token must grant to see, get or complete it.
        """
        check_options("prompt()", options, PromptOptions)
        if isinstance(fn, str):
            options["name"], fn = fn, None

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add_prompt(func, **options)
            return func

        return register if fn is None else register(fn)

    def add_prompt(self, fn: Callable[..., Any], **options: Unpack[PromptOptions]) -> None:
        """Register a prompt at any time (options as for :meth:`prompt`)."""
        complete = options.pop("complete", None)
        prompt = Prompt.from_function(fn, **options)
        completers = self._completers("ref/prompt", prompt.name, prompt.argument_names, complete)
        self._prompts.add(prompt)
        for argument, source in completers.items():
            self._completions.add("ref/prompt", prompt.name, argument, source)

    def remove_prompt(self, name: str) -> None:
        self._prompts.remove(name)

    # ------------------------------------------------------------------ completions

    def completion(
        self, *, prompt: str | None = None, resource: str | None = None, argument: str
    ) -> Callable[[F], F]:
        """Register a completer for ``argument`` of a prompt (``prompt=name``) or a
        resource template (``resource="app://items/{id}"``). It takes the partial
        value (and optionally ``arguments``, the values of the other arguments so
        far, and a ``Context``) and returns a list of strings or a ``Completion``.
        """
        if (prompt is None) == (resource is None):
            raise TypeError("completion() needs exactly one of prompt= or resource=")
        ref_type: RefType = "ref/prompt" if prompt is not None else "ref/resource"
        target = prompt if prompt is not None else resource
        assert target is not None

        def register(fn: F) -> F:
            self._completions.add(ref_type, target, argument, fn)
            return fn

        return register

    def _completers(
        self, ref_type: RefType, target: str, arguments: Sequence[str], complete: Mapping[str, CompleterSource] | None
    ) -> dict[str, CompleterSource]:
        """``complete=`` checked before anything is registered."""
        for argument, source in (complete or {}).items():
            if argument not in arguments:
                raise ValueError(f"complete= names {argument!r}, which is not an argument of {target!r}")
            Completer(source, f"argument {argument!r} of {target!r}")  # fails on a bad signature
        return dict(complete or {})
