"""The resources, prompts, completions, MCP Apps and skills half of the
extension's API (a base class of :class:`~flask_mcp.MCP`): decorators that
register plain functions and return them unchanged, and their run-time
counterparts."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar, overload

from .apps import CSP, UI_MIME_TYPE, DomainSource, UIOptions
from .completions import Completer, CompleterSource, CompletionRegistry, RefType
from .prompts import Prompt, PromptRegistry
from .resources import CACHE_SCOPES, Resource, ResourceRegistry
from .schema import describe
from .skill_folders import ScopesSpec, load_directory
from .skills import SkillRegistry, generated_skill

F = TypeVar("F", bound=Callable[..., Any])


class ServerSurface:
    """Registration of resources, resource templates, prompts, completers and views."""

    _resources: ResourceRegistry
    _prompts: PromptRegistry
    _completions: CompletionRegistry
    _skills: SkillRegistry

    def _init_surface(self, on_list_changed: Callable[[str], None], on_completions: Callable[[], None]) -> None:
        """Create the registries; ``on_list_changed(kind)`` hears every change of
        the resource or prompt lists ("resources", "prompts"), ``on_completions()``
        every completer added."""
        self._resources = ResourceRegistry()
        self._prompts = PromptRegistry()
        self._completions = CompletionRegistry(self._prompts, self._resources)
        self._resources.on_list_changed.append(on_list_changed)
        self._prompts.on_list_changed.append(on_list_changed)
        self._completions.on_change.append(on_completions)
        self._skills = SkillRegistry()
        self._skills.on_list_changed.append(on_list_changed)

    @property
    def resources(self) -> ResourceRegistry:
        return self._resources

    @property
    def prompts(self) -> PromptRegistry:
        return self._prompts

    @property
    def completions(self) -> CompletionRegistry:
        return self._completions

    @property
    def skills(self) -> SkillRegistry:
        return self._skills

    # ------------------------------------------------------------------ resources

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        size: int | None = None,
        annotations: dict[str, Any] | None = None,
        icons: Sequence[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        complete: Mapping[str, CompleterSource] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
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
        options: dict[str, Any] = {
            "name": name, "title": title, "description": description, "mime_type": mime_type, "size": size,
            "annotations": annotations, "icons": icons, "meta": meta, "ttl_ms": ttl_ms, "cache_scope": cache_scope,
            "complete": complete, "scopes": scopes,
        }

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    def add_resource(
        self, fn: Callable[..., Any], uri: str, *, complete: Mapping[str, CompleterSource] | None = None,
        **options: Any,
    ) -> None:
        """Register a resource or template at any time (options as for :meth:`resource`)."""
        resource = Resource.from_function(fn, uri, **options)
        completers = self._completers("ref/resource", uri, resource.template.variables if resource.template else (),
                                      complete)
        self._resources.add(resource)
        for argument, source in completers.items():
            self._completions.add("ref/resource", uri, argument, source)

    def remove_resource(self, uri: str) -> None:
        """Remove the resource (or template) registered at ``uri``."""
        self._resources.remove(uri)

    def ui_resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        csp: CSP | Mapping[str, Sequence[str]] | None = None,
        permissions: Iterable[str] | None = None,
        domain: DomainSource = "auto",
        prefers_border: bool | None = None,
        annotations: dict[str, Any] | None = None,
        icons: Sequence[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]:
        """Register an MCP Apps view: a ``ui://`` resource whose function returns a
        complete HTML document, served as ``text/html;profile=mcp-app`` with
        ``_meta.ui`` on its listing entry and contents. Link a tool to it with
        ``@mcp.tool(ui=uri)``.

        ``csp``: origins the view may reach (:class:`~flask_mcp.apps.CSP` or a dict
        with ``connectDomains``, ``resourceDomains``, ``frameDomains``,
        ``baseUriDomains``); ``permissions``: ``camera``, ``microphone``,
        ``geolocation``, ``clipboardWrite``; ``domain``: the view's stable sandbox
        origin -- ``"auto"`` derives Claude's from the URL each request reached
        the server at, a string is used as is, a function gets that URL, ``None``
        leaves it to the host; ``prefers_border``: whether the host draws a border;
        ``scopes``: what the caller's token must grant (as for :meth:`resource`).
        """
        if not uri.startswith("ui://"):
            raise ValueError(f"An MCP Apps view needs a ui:// URI (got {uri!r})")
        ui = UIOptions.build(csp=csp, permissions=permissions, domain=domain, prefers_border=prefers_border)
        options: dict[str, Any] = {
            "name": name, "title": title, "description": description, "mime_type": UI_MIME_TYPE,
            "annotations": annotations, "icons": icons, "meta": meta, "ttl_ms": ttl_ms, "cache_scope": cache_scope,
            "ui": ui, "scopes": scopes,
        }

        def register(fn: F) -> F:
            self.add_resource(fn, uri, **options)
            return fn

        return register

    # ------------------------------------------------------------------ prompts

    @overload
    def prompt(self, fn: F) -> F: ...

    @overload
    def prompt(
        self,
        fn: str | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        complete: Mapping[str, CompleterSource] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Callable[[F], F]: ...

    def prompt(
        self,
        fn: Callable[..., Any] | str | None = None,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        icons: Sequence[dict[str, Any]] | None = None,
        meta: dict[str, Any] | None = None,
        complete: Mapping[str, CompleterSource] | None = None,
        scopes: Sequence[str] | None = None,
    ) -> Any:
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
        if isinstance(fn, str):
            name, fn = fn, None
        options: dict[str, Any] = {
            "name": name, "title": title, "description": description, "icons": icons, "meta": meta,
            "complete": complete, "scopes": scopes,
        }

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            self.add_prompt(func, **options)
            return func

        return register if fn is None else register(fn)

    def add_prompt(
        self, fn: Callable[..., Any], *, complete: Mapping[str, CompleterSource] | None = None, **options: Any
    ) -> None:
        """Register a prompt at any time (options as for :meth:`prompt`)."""
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

    # ------------------------------------------------------------------ skills

    def skills_from_directory(
        self,
        path: str | os.PathLike[str],
        *,
        prefix: str | None = None,
        scopes: ScopesSpec = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> list[str]:
        """Serve every skill under ``path`` (each folder holding a ``SKILL.md``,
        ``path`` itself included) through the skills extension; returns their
        ``SKILL.md`` URIs, ``skill://<prefix>/<folder path>/SKILL.md``.

        The files are read now and served from memory, with a manifest of their
        SHA-256 digests and sizes. Refused here: a ``SKILL.md`` without front
        matter ``name`` and ``description``, a name unlike its folder's, a link
        leading outside the skill's folder, a skill over 512 files or 16 MiB.
        Hidden files and ``__pycache__`` are left out. ``scopes``: what a caller's
        token must grant to see and read the skills (one list for all, or a dict
        by skill name); ``ttl_ms``/``cache_scope``: cache hints of their reads.
        Needs PyYAML (``pip install 'flask-mcp[skills]'``).
        """
        _check_cache_hints(ttl_ms, cache_scope, f"Skills in {str(path)!r}")
        skills = load_directory(path, prefix=prefix, scopes=scopes, ttl_ms=ttl_ms, cache_scope=cache_scope)
        self._skills.add(skills)
        return [skill.uri for skill in skills]

    def skill(
        self,
        name: str | None = None,
        *,
        description: str | None = None,
        prefix: str | None = None,
        frontmatter: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> Callable[[F], F]:
        """Register a function that generates a skill's files on each read; its
        manifest is ``"dynamic"`` (no digests). It returns the ``SKILL.md`` body
        (markdown; the front matter is written from ``name``, ``description`` and
        ``frontmatter``) or a dict ``{"SKILL.md": body, "path/file": text or bytes}``.

        ``name`` defaults to the function's name with ``-`` for ``_``,
        ``description`` to its docstring; ``frontmatter``: further fields
        (``license``, ``metadata``...); ``scopes``, ``ttl_ms``, ``cache_scope`` as
        for :meth:`skills_from_directory`. The function may take a ``Context``.
        """
        def register(fn: F) -> F:
            self.add_skill(fn, name=name, description=description, prefix=prefix, frontmatter=frontmatter,
                           scopes=scopes, ttl_ms=ttl_ms, cache_scope=cache_scope)
            return fn

        return register

    def add_skill(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        prefix: str | None = None,
        frontmatter: Mapping[str, Any] | None = None,
        scopes: Sequence[str] | None = None,
        ttl_ms: int | None = None,
        cache_scope: str | None = None,
    ) -> str:
        """Register a generated skill at any time (see :meth:`skill`); returns its ``SKILL.md`` URI."""
        chosen = name or fn.__name__.replace("_", "-")
        summary, _ = describe(fn)
        _check_cache_hints(ttl_ms, cache_scope, f"Skill {chosen!r}")
        skill = generated_skill(
            fn, name=chosen, description=description or summary or "", prefix=prefix, frontmatter=frontmatter,
            scopes=scopes, ttl_ms=ttl_ms, cache_scope=cache_scope,
        )
        self._skills.add([skill])
        return skill.uri

    def remove_skill(self, uri: str) -> None:
        """Stop serving the skill whose ``SKILL.md`` is at ``uri``."""
        self._skills.remove(uri)


def _check_cache_hints(ttl_ms: int | None, cache_scope: str | None, label: str) -> None:
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0):
        raise ValueError(f"{label}: ttl_ms must be an integer >= 0 (got {ttl_ms!r})")
    if cache_scope is not None and cache_scope not in CACHE_SCOPES:
        raise ValueError(f"{label}: cache_scope must be 'public' or 'private' (got {cache_scope!r})")
