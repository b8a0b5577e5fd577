"""The bearer token of each request to the endpoint: read from the
``Authorization`` header, checked by the app's verifier, refused with the
RFC 6750 answers (400, 401 with a ``WWW-Authenticate`` challenge, 503)."""

from __future__ import annotations

import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

from flask import current_app, has_request_context, request
from werkzeug.exceptions import BadRequest, ServiceUnavailable, Unauthorized

from ..config import Settings
from ..errors import MCPHTTPException
from ..protocol.errors import ErrorCode
from .metadata import metadata_url, resource_url
from .tokens import InvalidToken, Principal, TokenVerifier, VerifierUnavailable

logger = logging.getLogger("flask_mcp")

#: RFC 6750 ``b64token``: what a bearer token may look like on the wire.
_B64TOKEN = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
MAX_TOKEN_LENGTH = 16 * 1024


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
    name this server, is refused here too. ``user_loader`` (looked up per
    request too: ``@mcp.user_loader``) then loads the app's user for the
    caller, once, into :attr:`Principal.user`; a token whose user it does not
    know is refused.
    """

    def __init__(
        self,
        settings: Settings,
        configured: TokenVerifier | None,
        decorated: Callable[[], TokenVerifier | None],
        clock: Callable[[], float] = time.time,
        user_loader: Callable[[], Callable[[Principal], Any] | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.configured = configured
        self.decorated = decorated
        self.clock = clock
        self.user_loader = user_loader
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
                return self._with_user(_with_token(acting, token))
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
        return self._with_user(principal)

    def load_user(self, principal: Principal) -> Any:
        """The app's user for ``principal``: the one it carries, else what
        ``@mcp.user_loader`` says (``None`` without a loader, or for a caller it
        does not know)."""
        if principal.user is not None:
            return principal.user
        loader = self.user_loader()
        return loader(principal) if loader is not None else None

    def _with_user(self, principal: Principal) -> Principal:
        """``principal`` with its user loaded, once per request: a token whose
        user the app does not know (deleted, deactivated) is refused here,
        before anything runs, rather than in every tool."""
        if principal.user is not None or self.user_loader() is None:
            return principal
        user = self.load_user(principal)
        if user is None:
            raise self._invalid("The access token's user is not known to this app.")
        return replace(principal, user=user)

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
    return replace(principal, token=token)
