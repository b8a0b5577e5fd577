"""Resources: the value object built at decoration time (a fixed URI or an
RFC 6570 template), what a resource function's return value becomes, and the
registry the core reads from."""

from __future__ import annotations

import base64
import json
import logging
import mimetypes
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Unpack

from pydantic_core import to_jsonable_python

from ..auth.scopes import permits, require_scopes, validate_scopes
from ..context import Context, serving
from ..coroutines import synced
from ..errors import ToolError
from ..protocol.errors import InternalError, MCPError
from ..protocol.providers import ReadOutcome
from ..protocol.request_info import InvalidToolArguments, RequestInfo
from .apps import UI_CAPABILITY, UI_EXTENSION, UIOptions
from .content import EmbeddedResource, ResourceContents
from .options import ResourceOptions, check_options
from .registry import ListChanged
from .schema import InputSpec, build_input, describe
from .uritemplate import UriTemplate, is_template

logger = logging.getLogger("flask_mcp")

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
CACHE_SCOPES = ("public", "private")



@dataclass
class Resource:
    """One registered resource (``template`` is ``None``) or resource template."""

    uri: str
    fn: Callable[..., Any]
    definition: dict[str, Any]
    input: InputSpec
    template: UriTemplate | None = None
    mime_type: str | None = None
    ttl_ms: int | None = None
    cache_scope: str | None = None
    ui: UIOptions | None = None
    #: Scopes the caller's token must grant (``@mcp.resource(uri, scopes=[...])``).
    scopes: tuple[str, ...] = ()
    #: ``fn`` as a read runs it (an ``async def`` through the app's ``ensure_sync``).
    call: Callable[..., Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.call = synced(self.fn, f"Resource {self.uri!r}")

    @classmethod
    def from_function(
        cls, fn: Callable[..., Any], uri: str, *, ui: UIOptions | None = None, **options: Unpack[ResourceOptions]
    ) -> Resource:
        """The resource (or template) ``fn`` becomes at ``uri`` with ``options``
        (``complete`` is the registry's business, not the resource's); ``ui``
        makes it an MCP Apps view."""
        check_options("resource()", options, ResourceOptions)
        name, title, description = options.get("name"), options.get("title"), options.get("description")
        mime_type, size, annotations = options.get("mime_type"), options.get("size"), options.get("annotations")
        icons, meta, scopes = options.get("icons"), options.get("meta"), options.get("scopes")
        ttl_ms, cache_scope = options.get("ttl_ms"), options.get("cache_scope")
        if not isinstance(uri, str) or not _SCHEME.match(uri):
            raise ValueError(f"Resource URI {uri!r} needs a scheme, e.g. 'file:///notes.txt' or 'app://items/{{id}}'")
        template = UriTemplate(uri) if is_template(uri) else None
        label = f"Resource {uri!r}"
        check_cache_hints(ttl_ms, cache_scope, label)
        required = validate_scopes(scopes, label)
        spec = _input(fn, label, template)
        summary, _ = describe(fn)
        if ui is None and mime_type is None:
            mime_type = mimetypes.guess_type(uri.split("?")[0])[0] if template is None else None
        definition: dict[str, Any] = {"uriTemplate" if template else "uri": uri, "name": name or fn.__name__}
        for key, value in (("title", title), ("description", description or summary), ("mimeType", mime_type)):
            if value:
                definition[key] = value
        if size is not None and template is None:
            definition["size"] = size
        if annotations:
            definition["annotations"] = dict(annotations)
        if icons:
            definition["icons"] = [dict(icon) for icon in icons]
        if meta:
            definition["_meta"] = dict(meta)
        return cls(uri, fn, definition, spec, template, mime_type, ttl_ms, cache_scope, ui, required)

    @property
    def label(self) -> str:
        """How errors name it: a template is not one resource, so say which it is."""
        return f"Resource template {self.uri!r}" if self.template else f"Resource {self.uri!r}"

    def visible_to(self, request: RequestInfo) -> bool:
        """Whether the lists show it to this caller: only what it may read."""
        return permits(self.scopes, request)

    def entry(self, request: RequestInfo) -> dict[str, Any]:
        """The listing entry; a view's ``_meta.ui`` depends on the endpoint's URL."""
        if self.ui is None:
            return self.definition
        meta = dict(self.definition.get("_meta") or {})
        ui = {**self.ui.meta(request.endpoint_url), **(meta.get("ui") or {})}
        return {**self.definition, "_meta": {**meta, "ui": ui}} if ui else self.definition

    def read(self, uri: str, arguments: dict[str, Any], request: RequestInfo) -> ReadOutcome:
        require_scopes(self.scopes, request, self.label)  # 403 insufficient_scope, before user code runs
        kwargs = dict(arguments)
        if self.input.context_param:
            kwargs[self.input.context_param] = Context(request)
        try:
            with serving(request):
                value = self.call(**kwargs)
        except MCPError:
            raise
        except ToolError as exc:
            raise InternalError(exc.message) from None
        except Exception:
            logger.exception("Resource %r raised while reading %s", self.uri, uri)
            raise InternalError(f"Reading {uri} failed with an internal error.") from None
        contents = to_contents(value, uri, self.mime_type)
        if self.ui is not None:
            contents = [self._with_ui(item, request) for item in contents]
        return ReadOutcome(contents, self.ttl_ms, self.cache_scope)

    def _with_ui(self, item: dict[str, Any], request: RequestInfo) -> dict[str, Any]:
        """Each contents item carries ``_meta.ui`` too (what it sets itself wins)."""
        assert self.ui is not None
        meta = dict(item.get("_meta") or {})
        listed = (self.definition.get("_meta") or {}).get("ui") or {}
        ui = {**self.ui.meta(request.endpoint_url), **listed, **(meta.get("ui") or {})}
        return {**item, "_meta": {**meta, "ui": ui}} if ui else item


@dataclass
class _Match:
    """A URI that names a registered resource, with its template's arguments."""

    resource: Resource
    uri: str
    arguments: dict[str, Any]

    def read(self, request: RequestInfo) -> ReadOutcome:
        return self.resource.read(self.uri, self.arguments, request)


def _input(fn: Callable[..., Any], label: str, template: UriTemplate | None) -> InputSpec:
    """The function's parameters must be the template's variables (plus a Context)."""
    try:
        spec = build_input(fn, context_type=Context, tool_name=label)
    except TypeError as exc:
        raise TypeError(str(exc).replace(f"Tool {label!r}", label)) from None
    params = set(spec.schema.get("properties", {}))
    required = set(spec.schema.get("required", []))
    variables = set(template.variables) if template else set()
    if template is None and params:
        raise TypeError(
            f"{label}: a fixed URI takes no parameters (only a Context); for {sorted(params)} "
            "use a URI template such as 'app://items/{id}'"
        )
    if variables - params:
        raise TypeError(f"{label}: template variable(s) {sorted(variables - params)} have no parameter of that name")
    if params - variables:
        raise TypeError(f"{label}: parameter(s) {sorted(params - variables)} are not variables of the template")
    optional = template.optional if template else frozenset()
    if required & optional:
        raise TypeError(f"{label}: parameter(s) {sorted(required & optional)} may be absent from a URI; give defaults")
    return spec


def to_contents(value: Any, uri: str, mime_type: str | None) -> list[dict[str, Any]]:
    """A resource function's return value as ``contents`` items: text for ``str``,
    a base64 blob for ``bytes``, :class:`ResourceContents` or
    :class:`EmbeddedResource` as they are (a list of them for several items),
    JSON text for anything else; ``None`` means the resource does not exist."""
    if value is None:
        return []
    helpers = (ResourceContents, EmbeddedResource)
    several = isinstance(value, (list, tuple)) and any(isinstance(v, helpers) for v in value)
    return [_item(item, uri, mime_type) for item in (value if several else [value])]


def _item(item: Any, uri: str, mime_type: str | None) -> dict[str, Any]:
    if isinstance(item, ResourceContents):
        return item.to_contents(uri, mime_type)
    if isinstance(item, EmbeddedResource):
        contents: dict[str, Any] = item.to_block()["resource"]
        return contents
    if isinstance(item, str):
        return {"uri": uri, "mimeType": mime_type or "text/plain", "text": item}
    if isinstance(item, (bytes, bytearray, memoryview)):
        blob = base64.b64encode(bytes(item)).decode("ascii")
        return {"uri": uri, "mimeType": mime_type or "application/octet-stream", "blob": blob}
    text = json.dumps(to_jsonable_python(item), ensure_ascii=False, separators=(",", ":"))
    return {"uri": uri, "mimeType": mime_type or "application/json", "text": text}


class ResourceRegistry:
    """The resources and templates of one :class:`~flask_mcp.MCP`, in
    registration order. ``on_list_changed`` callbacks hear every change."""

    def __init__(self) -> None:
        self.on_list_changed: list[ListChanged] = []
        self._fixed: dict[str, Resource] = {}
        self._templates: dict[str, Resource] = {}
        self._generation = 0
        self._lock = threading.Lock()

    @property
    def generation(self) -> int:
        return self._generation

    def add(self, resource: Resource) -> None:
        with self._lock:
            where = self._templates if resource.template else self._fixed
            if resource.uri in where:
                raise ValueError(f"A resource {resource.uri!r} is already registered")
            where[resource.uri] = resource
            self._generation += 1
        self._announce()

    def remove(self, uri: str) -> None:
        """Remove a resource or template by its URI (or template string)."""
        with self._lock:
            if self._fixed.pop(uri, None) is None and self._templates.pop(uri, None) is None:
                raise KeyError(f"No resource or template {uri!r}")
            self._generation += 1
        self._announce()

    def _announce(self) -> None:
        for callback in list(self.on_list_changed):
            callback("resources")

    def get(self, uri: str) -> Resource | None:
        """A registered resource or template by its exact URI or template string."""
        return self._fixed.get(uri) or self._templates.get(uri)

    def declared_scopes(self) -> set[str]:
        """Every scope a resource or template asks for (for protected resource metadata)."""
        entries = list(self._fixed.values()) + list(self._templates.values())
        return {scope for resource in entries for scope in resource.scopes}

    def __len__(self) -> int:
        return len(self._fixed) + len(self._templates)

    def __contains__(self, uri: object) -> bool:
        return uri in self._fixed or uri in self._templates

    # ------------------------------------------------------------------ ResourceProvider

    def resources(self, request: RequestInfo) -> list[dict[str, Any]]:
        """The fixed resources this caller may read (built per request: the
        entries depend on the caller's scopes and the endpoint's URL)."""
        return [r.entry(request) for r in list(self._fixed.values()) if r.visible_to(request)]

    def templates(self, request: RequestInfo) -> list[dict[str, Any]]:
        """The templates this caller may read, per request like :meth:`resources`."""
        return [r.entry(request) for r in list(self._templates.values()) if r.visible_to(request)]

    def find(self, uri: str) -> _Match | None:
        """The resource a URI names: a fixed one, else the first template (in
        registration order) whose pattern and parameter types it fits."""
        fixed = self._fixed.get(uri)
        if fixed is not None:
            return _Match(fixed, uri, {})
        for resource in list(self._templates.values()):
            assert resource.template is not None
            variables = resource.template.match(uri)
            if variables is None:
                continue
            try:
                arguments = resource.input.validate(variables)
            except InvalidToolArguments:
                continue  # e.g. {id} is not an integer: another template may fit
            return _Match(resource, uri, arguments)
        return None

    def extensions(self) -> dict[str, dict[str, Any]]:
        has_views = any(r.ui is not None for r in list(self._fixed.values()) + list(self._templates.values()))
        return {UI_EXTENSION: dict(UI_CAPABILITY)} if has_views else {}


def check_cache_hints(ttl_ms: int | None, cache_scope: str | None, label: str) -> None:
    """Refuse cache hints the spec does not allow (``label`` names what they are for)."""
    if ttl_ms is not None and (isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 0):
        raise ValueError(f"{label}: ttl_ms must be an integer >= 0 (got {ttl_ms!r})")
    if cache_scope is not None and cache_scope not in CACHE_SCOPES:
        raise ValueError(f"{label}: cache_scope must be 'public' or 'private' (got {cache_scope!r})")
