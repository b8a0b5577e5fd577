"""Who is calling, and may they: bearer tokens, the :class:`Principal` a
:class:`TokenVerifier` turns them into, scopes, and the RFC 9728 protected
resource metadata that tells clients where to get a token.

The ready-made verifiers (presence only, RFC 7662 introspection, local JWT
validation) live in :mod:`flask_mcp.verifiers`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from flask import Blueprint, Flask, Response, current_app, has_request_context, request
from werkzeug.exceptions import BadRequest, ServiceUnavailable, Unauthorized

from .config import Settings
from .errors import MCPHTTPException
from .protocol.errors import ErrorCode, MCPError
from .protocol.request_info import RequestInfo

logger = logging.getLogger("flask_mcp")

WELL_KNOWN = "/.well-known/oauth-protected-resource"

#: RFC 6750 ``b64token``: what a bearer token may look like on the wire.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
#: RFC 6749 ``scope-token``: printable ASCII without space, ``"`` and ``\``.
_SCOPE_TOKEN = re.compile(r"[\x21\x23-\x5B\x5D-\x7E]+")
MAX_TOKEN_LENGTH = 16 * 1024


def token_hash(token: str) -> str:
    """A stable, non-reversible name for a token (cache keys, subjects): never the token."""
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class Principal:
    """The authenticated caller: what a :class:`TokenVerifier` learned from a token.

    ``subject`` names the caller (sessions are bound to it); ``audience`` is the
    token's ``aud`` (``None`` when the verifier does not report it: the check is
    then the verifier's job); ``claims`` holds everything else the verifier
    saw. ``token`` is the raw bearer token, for tools that forward or check it
    themselves; it is left out of ``repr`` and comparisons.
    """

    subject: str
    scopes: frozenset[str] = frozenset()
    expires_at: float | None = None
    client_id: str | None = None
    audience: tuple[str, ...] | None = None
    claims: Mapping[str, Any] = field(default_factory=dict)
    token: str = field(default="", repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "scopes", frozenset(self.scopes))
        if self.audience is not None:
            object.__setattr__(self, "audience", tuple(self.audience))

    def has_scope(self, required: str) -> bool:
        """Whether the token grants ``required``, directly or through a broader scope."""
        return scope_granted(self.scopes, required)

    def has_scopes(self, required: Iterable[str]) -> bool:
        return all(self.has_scope(scope) for scope in required)


@runtime_checkable
class TokenVerifier(Protocol):
    """Turns a bearer token into a :class:`Principal`.

    Return ``None`` (or raise :class:`InvalidToken` with a reason) to reject the
    token: the client gets ``401``. Raise :class:`VerifierUnavailable` when the
    decision cannot be made right now (the authorization server is down): the
    client gets ``503``. A plain function ``token -> Principal | None`` works
    too (``@mcp.token_verifier``).
    """

    def verify(self, token: str) -> Principal | None: ...


class InvalidToken(Exception):
    """The token is not acceptable (unknown, revoked, expired, not for us): 401."""

    def __init__(self, description: str = "The access token is invalid.") -> None:
        super().__init__(description)
        self.description = description


class VerifierUnavailable(Exception):
    """The token cannot be checked right now (the authorization server is
    unreachable): 503, with ``Retry-After: retry_after`` (seconds)."""

    def __init__(self, message: str = "The access token cannot be checked now.", *, retry_after: int = 5) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class FunctionVerifier:
    """A plain function ``token -> Principal | None`` as a :class:`TokenVerifier`."""

    def __init__(self, fn: Callable[[str], Principal | None]) -> None:
        self.fn = fn

    def verify(self, token: str) -> Principal | None:
        return self.fn(token)


def as_verifier(value: Any) -> TokenVerifier:
    """A verifier object, or a function wrapped as one."""
    if isinstance(value, TokenVerifier):
        return value
    if callable(value):
        return FunctionVerifier(value)
    raise TypeError(f"A token verifier needs a verify(token) method or must be callable (got {value!r})")


# ---------------------------------------------------------------------- scopes


def scope_granted(granted: Iterable[str], required: str) -> bool:
    """Scope hierarchy: a granted scope implies itself and every scope below it
    in the ``:`` hierarchy, so ``files`` grants ``files:read`` and
    ``files:read:meta``; ``files:read`` does not grant ``files``."""
    return any(required == scope or required.startswith(scope + ":") for scope in granted)


def validate_scopes(scopes: Iterable[str] | None, where: str) -> tuple[str, ...]:
    """Scopes as declared on a tool, resource or prompt, checked at decoration time."""
    if scopes is None:
        return ()
    if isinstance(scopes, str):
        scopes = scopes.split()
    checked = tuple(scopes)
    for scope in checked:
        if not isinstance(scope, str) or not _SCOPE_TOKEN.fullmatch(scope):
            raise ValueError(f"{where}: invalid scope {scope!r} (printable ASCII without spaces, quotes or '\\')")
    return checked


def _principal_of(request: RequestInfo) -> Principal | None:
    auth = request.auth
    return auth if isinstance(auth, Principal) else None


def permits(scopes: Sequence[str], request: RequestInfo) -> bool:
    """Whether the caller of ``request`` may use something that needs ``scopes``
    (always, when the app does not authenticate: ``MCP_AUTH`` off)."""
    if not scopes or request.auth is None:
        return True
    principal = _principal_of(request)
    return principal is not None and principal.has_scopes(scopes)


class InsufficientScope(MCPError):
    """The caller's token lacks a scope: 403 with a step-up challenge."""

    code = ErrorCode.INVALID_REQUEST
    http_status = 403


def require_scopes(scopes: Sequence[str], request: RequestInfo, what: str) -> None:
    """Stop unless the caller has ``scopes``: ``403`` with ``WWW-Authenticate:
    Bearer error="insufficient_scope", scope="..."`` and a JSON-RPC error body.
    ``what`` names the thing, e.g. ``"Tool 'refund'"``. For tools, resources
    and prompts alike."""
    if permits(scopes, request):
        return
    principal = _principal_of(request)
    granted = " ".join(sorted(principal.scopes)) if principal else ""
    needed = " ".join(scopes)
    description = f"{what} needs the scope {needed}"
    message = (
        f"{description}; the access token grants {granted or 'no scopes'}. "
        "Ask the authorization server for a token with the missing scope."
    )
    raise InsufficientScope(
        message,
        data={"error": "insufficient_scope", "scope": needed},
        http_headers={"WWW-Authenticate": challenge("insufficient_scope", description, scope=needed)},
    )


# ---------------------------------------------------------------------- HTTP answers


class DetailedRefusal(MCPHTTPException):
    """An HTTP refusal whose JSON-RPC error body has ``data`` (the OAuth error
    code, a retry delay...), for clients that read it."""

    def __init__(self, description: str, *, data: dict[str, Any] | None = None,
                 extra_headers: dict[str, str] | None = None) -> None:
        super().__init__(description, extra_headers=extra_headers)
        self.data = data

    def get_body(self, environ: Any = None, scope: Any = None) -> str:
        error: dict[str, Any] = {"code": int(self.jsonrpc_code), "message": self.description}
        if self.data:
            error["data"] = self.data
        return json.dumps({"jsonrpc": "2.0", "error": error})


class AuthenticationRequired(DetailedRefusal, Unauthorized):
    """No token, or one that is not valid: 401 with a ``WWW-Authenticate`` challenge."""


class MalformedAuthorization(DetailedRefusal, BadRequest):
    """The credentials are malformed (RFC 6750 ``invalid_request``): 400."""


class AuthorizationServerUnavailable(DetailedRefusal, ServiceUnavailable):
    """The token could not be checked now: 503 (not 401: the token may be fine)."""

    jsonrpc_code = ErrorCode.INTERNAL_ERROR


def _quoted(text: str) -> str:
    """A value that may sit inside an RFC 6750 quoted auth-param."""
    return re.sub(r"[^\x20\x21\x23-\x5B\x5D-\x7E]", " ", text)


def challenge(error: str | None = None, description: str | None = None, *, scope: str | None = None) -> str:
    """A ``WWW-Authenticate: Bearer ...`` value pointing at our metadata document."""
    params = []
    if error:
        params.append(f'error="{error}"')
    if scope:
        params.append(f'scope="{_quoted(scope)}"')
    if has_request_context():
        params.append(f'resource_metadata="{metadata_url(current_app.extensions["mcp"].settings)}"')
    if description:
        params.append(f'error_description="{_quoted(description)}"')
    return "Bearer " + ", ".join(params)


# ---------------------------------------------------------------------- the authenticator


class Authenticator:
    """Checks the bearer token of each MCP request (when ``MCP_AUTH`` is on).

    The verifier is looked up per request: ``@mcp.token_verifier`` (which may
    be applied after ``init_app``) wins over the one built from configuration.
    Whatever the verifier, an expired token, or one whose audience does not
    name this server, is refused here too.
    """

    def __init__(
        self,
        settings: Settings,
        configured: TokenVerifier | None,
        decorated: Callable[[], TokenVerifier | None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.configured = configured
        self.decorated = decorated
        self.clock = clock
        #: One-time tokens of :meth:`acting_as` (empty unless something in this process asked).
        self._acting: dict[str, Principal] = {}

    @contextmanager
    def acting_as(self, principal: Principal) -> Iterator[str]:
        """A random bearer token that authenticates as ``principal``, in this
        process and until the block ends, without asking the verifier: for
        ``flask mcp ... --as`` and for tests. Nothing outside the process can
        make or learn one."""
        token = secrets.token_urlsafe(32)
        self._acting[token] = principal
        try:
            yield token
        finally:
            self._acting.pop(token, None)

    def verifier(self) -> TokenVerifier:
        verifier = self.decorated() or self.configured
        if verifier is None:
            logger.error("MCP_AUTH is on but no token verifier is set: use @mcp.token_verifier "
                         "or MCP_TOKEN_VERIFIER / MCP_INTROSPECTION_URL / MCP_JWKS_URL")
            raise AuthorizationServerUnavailable(
                "This server cannot check access tokens: it has no token verifier configured."
            )
        return verifier

    def authenticate(self) -> Principal | None:
        """The caller of the current request; ``None`` when auth is off.
        Raises the 400/401/503 answer otherwise."""
        if not self.settings.auth:
            return None
        token = self._bearer_token()
        if self._acting:
            acting = self._acting.get(token)
            if acting is not None:
                return _with_token(acting, token)
        try:
            principal = self.verifier().verify(token)
        except InvalidToken as exc:
            raise self._invalid(exc.description) from None
        except VerifierUnavailable as exc:
            logger.error("Access token check failed, answering 503: %s", exc)
            raise AuthorizationServerUnavailable(
                "The authorization server could not be reached to check the access token; "
                "retry shortly.",
                extra_headers={"Retry-After": str(getattr(exc, "retry_after", 5))},
            ) from None
        if principal is None:
            raise self._invalid("The access token is not valid.")
        if principal.expires_at is not None and principal.expires_at <= self.clock():
            raise self._invalid("The access token has expired.")
        expected = (self.settings.auth_audience or resource_url(self.settings)).rstrip("/")
        if principal.audience is not None and expected not in {a.rstrip("/") for a in principal.audience}:
            raise self._invalid(f"The access token was not issued for this server (audience {expected}).")
        if not principal.token:
            principal = _with_token(principal, token)
        return principal

    def _bearer_token(self) -> str:
        if "access_token" in request.args:
            raise MalformedAuthorization(
                "Access tokens go in the Authorization header, never in the query string.",
                data={"error": "invalid_request"},
                extra_headers={"WWW-Authenticate": challenge("invalid_request")},
            )
        header = request.headers.get("Authorization", "").strip()
        scheme, _, token = header.partition(" ")
        if not header or scheme.lower() != "bearer":
            scopes = " ".join(self.settings.auth_scopes) or None
            # No credentials (or another scheme): RFC 6750 section 3.1 gives no error code.
            raise AuthenticationRequired(
                "Authentication required: send an OAuth access token as 'Authorization: Bearer <token>'. "
                f"Where to get one: {metadata_url(self.settings)}",
                extra_headers={"WWW-Authenticate": challenge(scope=scopes)},
            )
        token = token.strip()
        if len(token) > MAX_TOKEN_LENGTH or not _B64TOKEN.fullmatch(token):
            raise MalformedAuthorization(
                "The Authorization header is malformed: expected 'Bearer <token>'.",
                data={"error": "invalid_request"},
                extra_headers={"WWW-Authenticate": challenge("invalid_request")},
            )
        return token

    def _invalid(self, description: str) -> AuthenticationRequired:
        return AuthenticationRequired(
            description,
            data={"error": "invalid_token", "error_description": description},
            extra_headers={"WWW-Authenticate": challenge("invalid_token", description)},
        )


def _with_token(principal: Principal, token: str) -> Principal:
    return Principal(
        subject=principal.subject,
        scopes=principal.scopes,
        expires_at=principal.expires_at,
        client_id=principal.client_id,
        audience=principal.audience,
        claims=principal.claims,
        token=token,
    )


# ---------------------------------------------------------------------- RFC 9728 metadata


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


def register_metadata(app: Flask, settings: Settings) -> None:
    """Serve the metadata at ``/.well-known/oauth-protected-resource`` and at the
    path-inserted variant for the endpoint (``.../oauth-protected-resource/mcp``)."""
    if not settings.auth:
        return
    if not settings.auth_servers and "mcp_oauth" not in app.extensions:
        logger.warning("MCP_AUTH is on but MCP_AUTH_SERVERS is empty: clients cannot discover "
                       "where to get a token (the metadata document lists no authorization server).")
    paths = {WELL_KNOWN, WELL_KNOWN + settings.url_prefix.rstrip("/")}
    if settings.resource_url:
        paths.add(WELL_KNOWN + urlsplit(settings.resource_url).path.rstrip("/"))
    bp = Blueprint("mcp_oauth_metadata", __name__)
    for number, path in enumerate(sorted(paths)):
        bp.add_url_rule(path, f"metadata_{number}", _metadata, methods=["GET"])
    app.register_blueprint(bp)


def _metadata() -> Response:
    state = current_app.extensions["mcp"]
    settings: Settings = state.settings
    scopes = settings.auth_scopes or _declared_scopes(state)
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


def _declared_scopes(state: Any) -> tuple[str, ...]:
    """Every scope a registered tool, resource or prompt asks for, when none are configured."""
    mcp = state.extension
    found = (mcp.tools.declared_scopes() | mcp.resources.declared_scopes() | mcp.prompts.declared_scopes()
             | mcp.skills.declared_scopes())
    return tuple(sorted(found))
