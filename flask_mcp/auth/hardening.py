"""Browser-facing hardening around the MCP endpoint: the CORS preset for
browser clients (``MCP_CORS_ORIGINS``) and exemption from the app's CSRF
protection (Flask-WTF), which would otherwise refuse every JSON-RPC POST.

CSRF does not apply to the endpoint: it takes no cookies or forms, only
bearer tokens and JSON, and foreign browser origins are refused (``Origin``
check) unless listed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable

from flask import Blueprint, Flask, Response, current_app, request

from . import login

#: Request headers a browser client may send (``Mcp-Param-*`` too).
ALLOWED_HEADERS = (
    "Accept",
    "Authorization",
    "Content-Type",
    "Last-Event-ID",
    "MCP-Protocol-Version",
    "Mcp-Method",
    "Mcp-Name",
    "Mcp-Session-Id",
)
PARAM_HEADER_PREFIX = "mcp-param-"
#: Response headers browser code may read.
EXPOSED_HEADERS = ("Mcp-Session-Id", "MCP-Protocol-Version", "WWW-Authenticate", "Retry-After")
ALLOWED_METHODS = "GET, POST, DELETE, OPTIONS"
PREFLIGHT_MAX_AGE = "600"

_ALLOWED_LOWER = frozenset(name.lower() for name in ALLOWED_HEADERS)


def install(app: Flask, blueprints: Iterable[Blueprint], *, cors: bool = True, endpoint: bool = False) -> None:
    """Exempt the blueprints from CSRF checks and add the CORS preset
    (``cors``: whether any origin is configured; without one the hook, which
    would run on every request, is not installed). ``endpoint``: the
    blueprints serve the MCP endpoint, whose requests start in
    :class:`~flask_mcp.auth.login.EndpointSessions` (no hook needed there)."""
    names = frozenset(bp.name for bp in blueprints)
    _exempt_from_csrf(app, names, endpoint)
    if not cors:
        return

    def add_cors(response: Response) -> Response:
        return _cors(response, names)

    app.after_request(add_cors)


def _exempt_from_csrf(app: Flask, names: frozenset[str], endpoint: bool) -> None:
    """Flask-WTF's ``CSRFProtect`` (``app.extensions["csrf"]``) exempts the
    blueprints now, or, when it is set up after flask-mcp, before its own
    check first runs: at the start of the endpoint's requests (before any
    hook), or in a ``before_request`` hook registered before Flask-WTF's."""

    def exempt() -> bool:
        csrf = app.extensions.get("csrf")
        if csrf is None:
            return False
        for name in names:
            csrf.exempt(app.blueprints[name])
        return True

    if exempt() or importlib.util.find_spec("flask_wtf") is None:
        return  # exempt now, or Flask-WTF is not installed: no per-request hook
    if endpoint:
        login.at_endpoint_start(app, exempt)
        return
    done = False

    def late_exemption() -> None:
        # Only the first request looks: Flask refuses new hooks (so a later
        # CSRFProtect().init_app) once the app has served a request.
        nonlocal done
        if not done:
            exempt()
            done = True

    app.before_request(late_exemption)


def _origin_allowed(origin: str, allowed: tuple[str, ...]) -> bool:
    return "*" in allowed or origin.rstrip("/") in allowed


def _cors(response: Response, names: frozenset[str]) -> Response:
    """CORS headers on the MCP endpoint's answers (errors included) for listed origins."""
    if request.blueprint not in names or "mcp" not in current_app.extensions:
        return response
    origin = request.headers.get("Origin")
    allowed = current_app.extensions["mcp"].settings.cors_origins
    if not origin or not allowed or not _origin_allowed(origin, allowed):
        return response
    response.headers["Access-Control-Allow-Origin"] = origin
    response.vary.add("Origin")
    response.headers["Access-Control-Expose-Headers"] = ", ".join(EXPOSED_HEADERS)
    if request.method == "OPTIONS" and "Access-Control-Request-Method" in request.headers:
        requested = request.headers.get("Access-Control-Request-Headers", "")
        granted = [
            name.strip()
            for name in requested.split(",")
            if name.strip().lower() in _ALLOWED_LOWER or name.strip().lower().startswith(PARAM_HEADER_PREFIX)
        ]
        response.headers["Access-Control-Allow-Methods"] = ALLOWED_METHODS
        response.headers["Access-Control-Allow-Headers"] = ", ".join(granted or ALLOWED_HEADERS)
        response.headers["Access-Control-Max-Age"] = PREFLIGHT_MAX_AGE
    return response
