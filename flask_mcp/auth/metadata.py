"""RFC 9728 protected-resource metadata: the document that tells a client
which authorization server issues tokens for this endpoint, and the URLs
that name the endpoint and the document."""

from __future__ import annotations

import json
import logging
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, request

from ..config import Settings
from .tokens import TokenVerifier
from .verifiers import IntrospectionVerifier, JWTVerifier

logger = logging.getLogger("flask_mcp")

WELL_KNOWN = "/.well-known/oauth-protected-resource"


def resource_url(settings: Settings) -> str:
    """The endpoint's canonical URL: ``MCP_RESOURCE_URL``, or the request's own
    (scheme and host as the app sees them: behind a proxy, use ProxyFix)."""
    if settings.resource_url:
        return settings.resource_url
    prefix = "" if settings.url_prefix == "/" else settings.url_prefix
    return request.url_root.rstrip("/") + prefix


def metadata_url(settings: Settings) -> str:
    """Where the resource's metadata lives: the path-inserted form of RFC 9728 §3.1."""
    parts = urlsplit(resource_url(settings))
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{parts.path.rstrip('/')}"


def register_metadata(app: Flask, settings: Settings, verifier: TokenVerifier | None = None) -> None:
    """Serve the metadata at ``/.well-known/oauth-protected-resource`` and at the
    path-inserted variant for the endpoint (``.../oauth-protected-resource/mcp``).

    Warns when clients need the document to find their tokens and it names no
    authorization server: tokens checked against an authorization server (JWT,
    introspection) with ``MCP_AUTH_SERVERS`` empty. An app that checks tokens of
    its own (``@mcp.verify_token``, ``@mcp.token_verifier``, a presence check)
    hands them out itself: nothing to advertise, no warning."""
    if not settings.auth:
        return
    if not settings.auth_servers and "mcp_oauth" not in app.extensions and _issued_elsewhere(verifier):
        logger.warning("MCP_AUTH is on and tokens are checked against an authorization server "
                       "(MCP_JWKS_URL / MCP_INTROSPECTION_URL), but MCP_AUTH_SERVERS is empty: clients "
                       "cannot discover where to get a token (the metadata document lists none).")
    paths = {WELL_KNOWN, WELL_KNOWN + settings.url_prefix.rstrip("/")}
    if settings.resource_url:
        paths.add(WELL_KNOWN + urlsplit(settings.resource_url).path.rstrip("/"))
    bp = Blueprint("mcp_oauth_metadata", __name__)
    for number, path in enumerate(sorted(paths)):
        bp.add_url_rule(path, f"metadata_{number}", _metadata, methods=["GET"])
    app.register_blueprint(bp)


def _issued_elsewhere(verifier: TokenVerifier | None) -> bool:
    """Whether the verifier checks tokens an authorization server issues."""
    return isinstance(verifier, IntrospectionVerifier | JWTVerifier)


def _metadata() -> Response:
    state = current_app.extensions["mcp"]
    settings: Settings = state.settings
    scopes = settings.auth_scopes or state.extension.declared_scopes()
    document: dict[str, Any] = {
        "resource": resource_url(settings),
        "authorization_servers": list(settings.auth_servers) or _own_authorization_server(),
        "bearer_methods_supported": ["header"],
        "resource_name": settings.name,
    }
    if scopes:
        document["scopes_supported"] = list(scopes)
    response = Response(json.dumps(document), mimetype="application/json")
    response.headers["Cache-Control"] = "public, max-age=3600"
    response.headers["Access-Control-Allow-Origin"] = "*"  # public, read by browser clients
    return response


def _own_authorization_server() -> list[str]:
    """The app's own authorization server (``MCP_OAUTH``), when it runs one."""
    own = current_app.extensions.get("mcp_oauth")
    return [own.issuer()] if own is not None else []
