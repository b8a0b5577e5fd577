"""What the consent and connected-apps pages show, prepared for their
templates: each scope with the app's description of it
(``MCP_OAUTH_SCOPE_DESCRIPTIONS``), how long ago an app was last used, and
the headers a page answers with (the packaged pages also get a policy that
loads nothing from elsewhere: an app's own template keeps only the framing
protection, so it may use its site's assets)."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple

from flask import current_app
from werkzeug.wrappers import Response as BaseResponse

from ...config import ConfigError
from .store import Connection

_PACKAGED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")

#: The packaged pages' policy: their own inline CSS, images from this app (the logos), nothing else.
PACKAGED_PAGE_POLICY = ("default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; base-uri 'none'; "
                        "frame-ancestors 'none'")


class ScopeLine(NamedTuple):
    """One scope as a page lists it: its description, or ``None`` when the app gives none."""

    scope: str
    description: str | None


@dataclass(frozen=True)
class ConnectedApp:
    """A row of the connected-apps page."""

    connection: Connection
    logo_url: str
    scopes: list[ScopeLine]
    last_used: str | None  # "5 minutes ago", or None: not used yet
    last_used_iso: str | None
    connected: str  # when it was first connected, as ``ago`` says it

    @property
    def client_name(self) -> str:
        return self.connection.client_name

    @property
    def client_id(self) -> str:
        return self.connection.client_id


def scope_descriptions(value: Any) -> dict[str, str]:
    """``MCP_OAUTH_SCOPE_DESCRIPTIONS``, checked: scope -> what it lets a client do."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) and v.strip()
                                                 for k, v in value.items()):
        raise ConfigError("MCP_OAUTH_SCOPE_DESCRIPTIONS must map each scope (a string) to a description "
                          f"(a non-empty string), e.g. {{'notes:read': 'Read your notes'}} (got {value!r})")
    return dict(value)


def describe(scopes: list[str] | str, descriptions: Mapping[str, str]) -> list[ScopeLine]:
    """Each scope with its description (the raw scope is shown when there is none)."""
    names = scopes.split() if isinstance(scopes, str) else scopes
    return [ScopeLine(scope, descriptions.get(scope)) for scope in names]


def ago(when: float, now: float | None = None) -> str:
    """``when`` for a person: "just now", "5 minutes ago", "3 days ago", then the date."""
    seconds = max(0.0, (time.time() if now is None else now) - when)
    if seconds < 60:
        return "just now"
    for unit, size, limit in (("minute", 60, 3600), ("hour", 3600, 86400), ("day", 86400, 30 * 86400)):
        if seconds < limit:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''} ago"
    return "on " + datetime.fromtimestamp(when, UTC).strftime("%d %b %Y")


def iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_packaged(template: str) -> bool:
    """Whether ``template`` resolves to the page shipped here (not an app's own of that name)."""
    filename = current_app.jinja_env.get_or_select_template(template).filename or ""
    return os.path.abspath(filename).startswith(_PACKAGED + os.sep)


def page_headers(response: BaseResponse, packaged: bool) -> BaseResponse:
    """No framing, no caching; the strict policy on a packaged page."""
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Content-Security-Policy"] = PACKAGED_PAGE_POLICY if packaged else "frame-ancestors 'none'"
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"
    return response
