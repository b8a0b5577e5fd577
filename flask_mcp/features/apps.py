"""MCP Apps (extension ``io.modelcontextprotocol/ui``): interactive HTML views
that hosts render in a sandboxed iframe next to a tool's result.

A view is a ``ui://`` resource of MIME type ``text/html;profile=mcp-app``
whose ``_meta.ui`` says what the sandbox may do (CSP domains, permissions, a
stable ``domain``); a tool names its view in ``_meta.ui.resourceUri``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The extension's identifier (capability ``extensions`` key).
UI_EXTENSION = "io.modelcontextprotocol/ui"
#: The MIME type of a view, exactly.
UI_MIME_TYPE = "text/html;profile=mcp-app"
#: What the server declares under ``capabilities.extensions``.
UI_CAPABILITY: dict[str, Any] = {"mimeTypes": [UI_MIME_TYPE]}

_CSP_KEYS = {
    "connect_domains": "connectDomains",
    "resource_domains": "resourceDomains",
    "frame_domains": "frameDomains",
    "base_uri_domains": "baseUriDomains",
}
_PERMISSIONS = ("camera", "microphone", "geolocation", "clipboardWrite")
_VISIBILITY = ("model", "app")

#: A view's ``domain``: ``"auto"``, a fixed host name, a function of the
#: endpoint URL, or ``None`` (left to the host).
DomainSource = str | Callable[[str], "str | None"] | None


def sandbox_domain(url: str) -> str:
    """Claude's stable sandbox origin for the MCP server at ``url``: the first 32
    hex digits of SHA-256 of the exact endpoint URL, then ``.claudemcpcontent.com``.

    ``url`` must be the URL the connector was configured with, scheme and path
    included (``https://example.com/mcp``); any other spelling gives a different
    domain, and a wrong one keeps Claude from showing the view at all."""
    return hashlib.sha256(url.encode()).hexdigest()[:32] + ".claudemcpcontent.com"


@dataclass(frozen=True)
class CSP:
    """Origins a view may reach (deny-by-default otherwise): ``connect_domains``
    (fetch, XHR, WebSocket), ``resource_domains`` (scripts, styles, images,
    fonts, media), ``frame_domains`` (nested iframes), ``base_uri_domains``."""

    connect_domains: Sequence[str] = ()
    resource_domains: Sequence[str] = ()
    frame_domains: Sequence[str] = ()
    base_uri_domains: Sequence[str] = ()

    @classmethod
    def coerce(cls, value: CSP | Mapping[str, Sequence[str]]) -> CSP:
        """A :class:`CSP` from itself or a dict with wire (``connectDomains``) or
        Python (``connect_domains``) keys."""
        if isinstance(value, CSP):
            return value
        wire_to_python = {wire: python for python, wire in _CSP_KEYS.items()}
        options: dict[str, Sequence[str]] = {}
        for key, domains in value.items():
            name = wire_to_python.get(key, key)
            if name not in _CSP_KEYS:
                raise ValueError(f"Unknown CSP key {key!r}; use {', '.join(_CSP_KEYS.values())}")
            if isinstance(domains, str) or not all(isinstance(d, str) for d in domains):
                raise ValueError(f"CSP {key!r} must be a list of origins")
            options[name] = tuple(domains)
        return cls(**options)

    def to_wire(self) -> dict[str, list[str]]:
        return {wire: list(getattr(self, python)) for python, wire in _CSP_KEYS.items() if getattr(self, python)}


@dataclass(frozen=True)
class UIOptions:
    """What ``_meta.ui`` says about a view; ``domain`` is resolved per request."""

    csp: CSP | None = None
    permissions: tuple[str, ...] = ()
    domain: DomainSource = "auto"
    prefers_border: bool | None = None

    @classmethod
    def build(
        cls,
        *,
        csp: CSP | Mapping[str, Sequence[str]] | None,
        permissions: Iterable[str] | Mapping[str, Any] | None,
        domain: DomainSource,
        prefers_border: bool | None,
    ) -> UIOptions:
        chosen = tuple(permissions or ())
        unknown = [p for p in chosen if p not in _PERMISSIONS]
        if unknown:
            raise ValueError(f"Unknown MCP Apps permission(s) {unknown}; use {', '.join(_PERMISSIONS)}")
        if not (domain is None or isinstance(domain, str) or callable(domain)):
            raise ValueError('domain must be "auto", a host name, a function of the endpoint URL, or None')
        return cls(CSP.coerce(csp) if csp is not None else None, chosen, domain, prefers_border)

    def meta(self, endpoint_url: str | None) -> dict[str, Any]:
        """``_meta.ui`` for a request that reached the server at ``endpoint_url``."""
        ui: dict[str, Any] = {}
        if self.csp is not None and self.csp.to_wire():
            ui["csp"] = self.csp.to_wire()
        if self.permissions:
            ui["permissions"] = {name: {} for name in self.permissions}
        domain = self._domain(endpoint_url)
        if domain:
            ui["domain"] = domain
        if self.prefers_border is not None:
            ui["prefersBorder"] = self.prefers_border
        return ui

    def _domain(self, endpoint_url: str | None) -> str | None:
        if self.domain is None:
            return None
        if isinstance(self.domain, str):
            if self.domain != "auto":
                return self.domain
            return sandbox_domain(endpoint_url) if endpoint_url else None
        return self.domain(endpoint_url) if endpoint_url else None


def tool_meta(resource_uri: str, visibility: Sequence[str] | None, meta: Mapping[str, Any] | None) -> dict[str, Any]:
    """A tool's ``_meta`` linking it to the view at ``resource_uri``: ``_meta.ui``
    (``resourceUri``, ``visibility``), plus the deprecated flat
    ``ui/resourceUri`` key older hosts read."""
    if not resource_uri.startswith("ui://"):
        raise ValueError(f"ui= must name a ui:// resource (got {resource_uri!r})")
    ui: dict[str, Any] = {**dict((meta or {}).get("ui") or {}), "resourceUri": resource_uri}
    if visibility is not None:
        chosen = list(visibility)
        if not chosen or any(v not in _VISIBILITY for v in chosen) or isinstance(visibility, str):
            raise ValueError(f'visibility must be a non-empty list of "model" and "app" (got {visibility!r})')
        ui["visibility"] = chosen
    return {**dict(meta or {}), "ui": ui, "ui/resourceUri": resource_uri}
